"""Diagnostic for sessions lent a GPU: kernelmagic's rows against key_averages(), every field.

    python tools/gpu_parity.py [OUT_DIR]

Profiles the Block and a training step on CUDA and prints each op row whose figures
differ from torch's ``key_averages()`` of the same session (less kernelmagic's own
synchronize), then the kernels view against torch's kernel events. With OUT_DIR, writes
the training step's Chrome trace and its key_averages() rows there (JSON). Exits 0
without CUDA.
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from workloads import block_and_input

import kernelmagic
from kernelmagic.core.range_names import SYNC_RANGE

FIELDS = ("count", "self_cpu_time_total", "cpu_time_total", "self_device_time_total",
          "device_time_total", "self_cpu_memory_usage", "cpu_memory_usage",
          "self_device_memory_usage", "device_memory_usage")


def compare(label: str, fn, **options) -> tuple[object, object]:
    seen: dict[str, object] = {}
    result = kernelmagic.profile(fn, iters=3, warmup=2, name=label,
                                 on_trace_ready=lambda p: seen.setdefault("p", p), **options)
    prof = seen["p"]
    expected = {}
    for a in prof.key_averages():
        if a.device_type == torch.autograd.DeviceType.CPU and not a.is_user_annotation:
            expected[a.key] = {f: getattr(a, f) for f in FIELDS}
    for e in prof.function_events:
        if e.cpu_parent is not None and e.cpu_parent.name == SYNC_RANGE:
            for f in FIELDS:
                expected[e.name][f] -= getattr(e, f)
    bad = 0
    for row in result.rows:
        want = expected.pop(row.key, None)
        if want is None:
            print(f"  extra row {row.key}")
            bad += 1
            continue
        for f in FIELDS:
            if abs(getattr(row, f) - want[f]) > 1e-6 * max(1.0, abs(want[f])):
                print(f"  {row.key} {f}: ours {getattr(row, f)} torch {want[f]}")
                bad += 1
    missing = [k for k, v in expected.items() if v["count"] and not k.startswith("[")]
    print(f"{label}: {len(result.rows)} rows, {bad} differences, missing {missing[:10]}")
    kernels = [e for e in prof.function_events
               if e.device_type != torch.autograd.DeviceType.CPU and not e.is_user_annotation]
    print(f"  kernels: ours {sum(k.count for k in result.kernels)} "
          f"{sum(k.device_time_total for k in result.kernels):.3f} us; torch {len(kernels)} "
          f"{sum(k.time_range.elapsed_us() for k in kernels):.3f} us; gpu busy {result.gpu_busy}")
    return result, prof


def main() -> None:
    if not torch.cuda.is_available():
        print("no CUDA device")
        return
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    model, x = block_and_input(batch=4, seq=128)
    model, x = model.cuda(), x.cuda()

    def infer() -> None:
        with torch.inference_mode():
            model(x)

    compare("block", infer, memory=True)
    train, y = block_and_input(batch=4, seq=64, d=128)
    train, y = train.cuda().train(), y.cuda()
    opt = torch.optim.AdamW(train.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        train(y).square().mean().backward()
        opt.step()

    result, prof = compare("train", step, memory=True, modules=True, timeline=True)
    print(result.table(limit=8))
    for f in result.findings():
        print("finding:", f)
    if len(sys.argv) > 1:
        out = sys.argv[1]
        prof.export_chrome_trace(os.path.join(out, "train_step_cuda.json"))
        rows = [{"key": a.key, **{f: getattr(a, f) for f in FIELDS}}
                for a in prof.key_averages()]
        with open(os.path.join(out, "train_step_cuda_key_averages.json"), "w") as fh:
            json.dump(rows, fh)


if __name__ == "__main__":
    main()
