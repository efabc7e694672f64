#!/usr/bin/env bash
# Does torch's profiler keep its GPU records right across many profiled cells in one process
# (pytorch/pytorch#175790: "only first CUDA profile of the process is correct", #192021:
# kernel events dropped at session start)? A notebook profiles many cells in one kernel, and
# the what-if model (docs/what-if.md) trusts the launch -> kernel edges. Profiles 20 cells in
# one Python process on CUDA; each must record as many kernels as kernel launches, none
# starting before its launch, no overlap on a stream, no zero timestamp (result.trust).
# Prints REPEATED CELLS OK, or REPEATED CELLS FAILED with the cells that broke a rule.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device: nothing was checked"; exit 1
fi
timeout 540 python3 - <<'PY' 2>&1 | tee "$OUT/repeated_cells.txt"
import sys

import torch

import kernelmagic
from kernelmagic.core.op_names import LAUNCH_CALLS

x = torch.randn(512, 512, device="cuda")
w = torch.randn(512, 512, device="cuda")


def cell():
    y = torch.relu(x @ w)
    return (y + 1).sum()


bad = []
for i in range(20):
    r = kernelmagic.profile(cell, iters=5, warmup=2, name=f"cell{i}")
    launches = sum(row.count for row in r.rows if row.key in LAUNCH_CALLS)
    kernels = sum(k.count for k in r.kernels)
    t = r.trust
    line = (f"cell {i:2d}: {launches} launches, {kernels} kernels, "
            f"{t.before_launch} before their launch (clock {t.clock_offset_us:.1f} us), "
            f"{t.missing_work} launches without work, {t.stream_overlaps} stream overlaps, "
            f"{t.zero_timestamps} zero timestamps; what_if({{}}) "
            f"{r.what_if({}).iteration_us:.1f} of {r.stats.median * 1e6:.1f} us")
    print(line)
    if (launches != kernels or t.before_launch or t.missing_work or t.stream_overlaps
            or t.zero_timestamps):
        bad.append(line)
if bad:
    print(f"REPEATED CELLS FAILED: {len(bad)} of 20 cells broke a rule")
    sys.exit(1)
print(f"REPEATED CELLS OK: 20 cells on {torch.cuda.get_device_name()}, every kernel after "
      "its launch")
PY
exit "${PIPESTATUS[0]}"
