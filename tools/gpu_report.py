"""GPU facts for the closing notes of a session lent a GPU (run by gpu-check.sh).

    python tools/gpu_report.py

Prints, for a compute-bound and a launch-bound cell: the per-iteration wall time that
kernelmagic reports (read after torch.cuda.synchronize()), the kernel time per iteration,
GPU busy/idle, and the findings. Exits 0 without CUDA.
"""

from __future__ import annotations

import statistics
import sys

import torch

import kernelmagic
from kernelmagic.render.views import view_notes

if not torch.cuda.is_available():
    print("no CUDA device")
    sys.exit(0)

print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
a = torch.randn(4096, 4096, device="cuda")
small = torch.randn(64, device="cuda")


def launch_bound() -> None:
    x = small
    for _ in range(200):
        x = x.add(1).mul(0.5)


for label, fn in (("4096^2 matmul", lambda: a @ a), ("400 tiny kernels", launch_bound)):
    r = kernelmagic.profile(fn, iters=10, warmup=3, name=label)
    kernel_us = sum(k.device_time_total for k in r.kernels) / r.iters
    print(f"\n== {label}")
    print(r.summary())
    print(f"wall median {r.stats.median * 1e3:.3f} ms; kernel time per iteration "
          f"{kernel_us / 1e3:.3f} ms; GPU busy median "
          f"{statistics.median(r.gpu_busy) / 1e3 if r.gpu_busy else 0:.3f} ms")
    for note in view_notes(r):
        print(note)
    for f in r.findings():
        print("finding:", f)
    print(r.table(limit=5))

# --- --roofline: the datasheet peaks, their check, and four cells of known character ---
from kernelmagic.render.roofline import verdict_line  # noqa: E402

roofs = kernelmagic.peaks()
print(f"\n== roofline peaks: {roofs.source}; "
      + ", ".join(f"{dt} {v / 1e12:.0f} TFLOP/s" for dt, v in roofs.flops_per_s.items())
      + f", {roofs.bytes_per_s / 1e12:.2f} TB/s; measured: "
      + ", ".join(f"{k} {v / 1e12:.2f}T" for k, v in roofs.measured.items())
      + (f"; note: {roofs.note}" if roofs.note else ""))
big = torch.randn(64 * 2**20, device="cuda")
h = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for label, fn in (("4096^2 fp32 matmul", lambda: a @ a), ("8192^2 bf16 matmul", lambda: h @ h),
                  ("64M-element add", lambda: big + big), ("400 tiny kernels", launch_bound)):
    r = kernelmagic.profile(fn, iters=5, warmup=2, name=label, roofline=True)
    print(f"\n== {label} (--roofline)\n{verdict_line(r)}")
    for row in r.roofline[:3]:
        print(f"  {row.key}: {row.bound}, {row.flops_per_s / 1e12:.2f} TFLOP/s, "
              f"{row.bytes_per_s / 1e9:.1f} GB/s, {row.roof_share:.1%} of its roof, "
              f"{row.time / r.iters:.1f} µs per iteration")
    for f in r.findings():
        if f.rule in ("memory_bound", "overhead_bound", "compute_far_from_peak"):
            print("finding:", f)
