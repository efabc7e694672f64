"""Records real CUDA profiles for offline tests (run by gpu-check.sh on a lent GPU).

    OUT=/tmp/out python tools/gpu_capture.py

Writes ``$OUT/gpu_capture.tar.gz`` holding, for each workload, the Chrome trace that
``torch.profiler`` exported (``<name>.json.gz``) and the rows of ``key_averages()`` of the
same session (``key_averages.json``), so that trace loading can be checked against
torch's own figures without a GPU; and prints the device's measured matmul FLOP/s per
dtype and copy bandwidth. Exits 0 without CUDA.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from workloads import Block

if not torch.cuda.is_available():
    print("no CUDA device")
    sys.exit(0)

out = Path(os.environ.get("OUT", "/tmp/out"))
out.mkdir(parents=True, exist_ok=True)
work = Path(tempfile.mkdtemp())
FIELDS = ("count", "self_cpu_time_total", "cpu_time_total", "self_device_time_total",
          "device_time_total")


def record(name: str, step, steps: int = 3) -> list[dict]:
    """Profile ``steps`` steps (after one warm-up step) as users do, and export the trace."""
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    rows: list[dict] = []

    def ready(prof) -> None:  # what tensorboard_trace_handler users get
        plain = work / f"{name}.json"
        prof.export_chrome_trace(str(plain))
        with open(plain, "rb") as src, gzip.open(work / f"{name}.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        plain.unlink()
        rows.extend({"key": str(a.key), **{f: float(getattr(a, f)) for f in FIELDS}}
                    for a in prof.key_averages())

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=ready) as prof:
        for _ in range(steps + 1):
            step()
            torch.cuda.synchronize()
            prof.step()
    print(f"{name}: {len(rows)} key_averages rows")
    return rows


def record_kernelmagic(name: str, step) -> list[dict]:
    """kernelmagic's own run: its trace (NAME/iter i ranges) and torch's key_averages."""
    import kernelmagic

    rows: list[dict] = []

    def ready(prof) -> None:
        rows.extend({"key": str(a.key), **{f: float(getattr(a, f)) for f in FIELDS}}
                    for a in prof.key_averages())

    result = kernelmagic.profile(step, iters=5, warmup=2, name=name, on_trace_ready=ready,
                                 trace=str(work / f"{name}.json.gz"), force=True)
    result.save(work / f"{name}.kernelmagic.json")
    print(result.summary())
    return rows


torch.manual_seed(0)
block = Block().cuda()
opt = torch.optim.AdamW(block.parameters(), lr=1e-4)
x = torch.randn(8, 256, 512, device="cuda")


def train_step() -> None:
    opt.zero_grad(set_to_none=True)
    loss = block(x).square().mean()
    loss.backward()
    opt.step()


small = torch.randn(64, device="cuda")
big = torch.randn(2048, 2048, device="cuda")


def launch_and_sync() -> None:
    """Hundreds of tiny kernels, a host sync per loop (.item()), and an fp32 matmul."""
    y = small
    for _ in range(50):
        y = y.add(1).mul(0.5)
        if y.sum().item() > 1e30:
            break
    (big @ big).relu_()


captured = {"train_step": record("train_step", train_step),
            "launch_and_sync": record("launch_and_sync", launch_and_sync),
            "km_train_step": record_kernelmagic("km_train_step", train_step)}
(work / "key_averages.json").write_text(json.dumps(
    {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": captured},
    indent=1))
with tarfile.open(out / "gpu_capture.tar.gz", "w:gz") as tar:
    for path in sorted(work.iterdir()):
        tar.add(path, arcname=path.name)
print("wrote", out / "gpu_capture.tar.gz", [p.name for p in sorted(work.iterdir())])


def timed(fn, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


n = 8192
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    seconds = timed(lambda a=a: a @ a, 10)
    print(f"peak matmul {str(dtype).removeprefix('torch.')}: {2 * n**3 / seconds / 1e12:.1f} "
          f"TFLOP/s (TF32 allowed: {torch.backends.cuda.matmul.allow_tf32})")
src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
seconds = timed(lambda: dst.copy_(src), 20)
print(f"peak copy: {2 * src.numel() / seconds / 1e12:.2f} TB/s (read + write of 1 GiB)")
