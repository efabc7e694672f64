"""A short CUDA workload profiled by kernelmagic, for Nsight to see its NVTX ranges.

    ncu --nvtx --nvtx-include "regex:.*" python tools/nvtx_probe.py
    nsys profile --trace=cuda,nvtx python tools/nvtx_probe.py

kernelmagic opens NVTX ranges ``probe``, ``probe/warmup`` and ``probe/iter <i>``; the
kernels launched inside them should be attributed to those ranges.
"""

from __future__ import annotations

import sys

import torch

import kernelmagic

if not torch.cuda.is_available():
    print("no CUDA device: nothing to probe")
    sys.exit(0)

a = torch.randn(1024, 1024, device="cuda")
result = kernelmagic.profile(lambda: torch.relu(a @ a), iters=3, warmup=1, name="probe")
print(result.summary())
print(result.table(limit=5))
