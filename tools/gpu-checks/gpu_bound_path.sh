#!/usr/bin/env bash
# The dependency model on a real GPU (docs/what-if.md, #43): three live cells on CUDA.
# - a GPU-bound cell (eight 8192^2 matmuls): the critical path is GPU work, as long as the
#   median iteration; what_if says what the matmuls twice as fast would save, beside the
#   measured saving of the same cell with matmuls of half the work;
# - a queue-full cell (5,000 elementwise kernels of ~30 us, launched faster than they run):
#   launches wait for slots, the path is GPU work, the GPU rows twice as fast save about
#   half, beside the measured saving of the same cell on half the data;
# - a launch-bound cell (400 tiny kernels): the path is the CPU's; GPU rows save ~nothing.
# Prints GPU-BOUND PATH OK, or GPU-BOUND PATH FAILED with what broke; figures to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device: nothing was checked"; exit 1
fi
KINETO_LOG_LEVEL=6 timeout 170 python3 - <<'PY' 2>&1 | tee "$OUT/gpu_bound_path.txt"
import json
import os
import sys

import torch

import kernelmagic
from kernelmagic.views.dependencies import LAUNCH

failed = []
figures = {}


def by_category(result):
    total = sum(r.time for r in result.critical_path)
    out = {}
    for r in result.critical_path:
        out[r.category] = out.get(r.category, 0.0) + r.time / total
    return total, out


def check(name, result, gpu_at_least=None, cpu_at_least=None):
    total, cats = by_category(result)
    median = result.stats.median * 1e6
    figures[name] = {"median_us": median, "path_us": total, "path": cats,
                     "summary": result.summary()}
    print(f"{name}: median {median:.1f} us, path {total:.1f} us, {cats}")
    if abs(total - median) > 1e-6 * median + 1e-3:
        failed.append(f"{name}: path {total} us != median {median} us")
    if gpu_at_least is not None and cats.get("GPU work", 0.0) < gpu_at_least:
        failed.append(f"{name}: GPU work {cats.get('GPU work', 0.0):.2f} < {gpu_at_least}")
    if cpu_at_least is not None:
        cpu = sum(v for k, v in cats.items() if k != "GPU work")
        if cpu < cpu_at_least:
            failed.append(f"{name}: CPU side {cpu:.2f} < {cpu_at_least}")
    return median


def saving(name, result, keys, halved_median):
    answer = result.what_if({k: 2.0 for k in keys}, side="device")
    measured = result.stats.median * 1e6 - halved_median
    figures[name]["what_if_device_2x_saved_us"] = answer.saved_us
    figures[name]["measured_half_work_saved_us"] = measured
    print(f"{name}: what_if {sorted(keys)} 2x on the device saves {answer.saved_us:.1f} us "
          f"({answer.saved_share:.1%}); the cell on half the work ran "
          f"{measured:.1f} us faster ({measured / (result.stats.median * 1e6):.1%})")
    return answer


n = 8192
x = torch.randn(n, n, device="cuda")
y = torch.randn(n, n, device="cuda")
y_half = torch.randn(n, n // 2, device="cuda")


def gpu_bound():
    for _ in range(8):
        x @ y


def gpu_bound_half():
    for _ in range(8):
        x @ y_half


r = kernelmagic.profile(gpu_bound, iters=5, warmup=2, name="gpu_bound")
check("gpu_bound", r, gpu_at_least=0.8)
half = kernelmagic.profile(gpu_bound_half, iters=5, warmup=2, name="gpu_bound_half")
a = saving("gpu_bound", r, [k.key for k in r.rows if k.key in ("aten::mm", "aten::matmul")],
           half.stats.median * 1e6)
if not 0.3 <= a.saved_share <= 0.6:
    failed.append(f"gpu_bound: matmuls 2x save {a.saved_share:.1%}, not about half")

big = torch.randn(16 * 2**20, device="cuda")
small = torch.randn(8 * 2**20, device="cuda")


def queue_full(t=big):
    for _ in range(5000):
        t.mul_(1.0000001)


r = kernelmagic.profile(queue_full, iters=3, warmup=1, name="queue_full")
check("queue_full", r, gpu_at_least=0.8)
model = r._model
waited = int((model.sync_cat == LAUNCH).sum())
figures["queue_full"]["launches_that_waited_for_a_slot"] = waited
print(f"queue_full: {waited} launches waited for a slot in the launch queue")
if not waited:
    failed.append("queue_full: no launch found waiting for a slot")
half = kernelmagic.profile(lambda: queue_full(small), iters=3, warmup=1, name="queue_half")
a = saving("queue_full", r, [k.key for k in r.rows], half.stats.median * 1e6)
if not 0.3 <= a.saved_share <= 0.6:
    failed.append(f"queue_full: GPU rows 2x save {a.saved_share:.1%}, not about half")

tiny = torch.randn(64, device="cuda")


def launch_bound():
    t = tiny
    for _ in range(400):
        t = t * 1.0001


r = kernelmagic.profile(launch_bound, iters=5, warmup=2, name="launch_bound")
check("launch_bound", r, cpu_at_least=0.7)
a = r.what_if({k.key: 2.0 for k in r.rows}, side="device")
figures["launch_bound"]["what_if_device_2x_saved_share"] = a.saved_share
print(f"launch_bound: every row's GPU work 2x saves {a.saved_share:.1%}")
if a.saved_share > 0.05:
    failed.append(f"launch_bound: GPU 2x saves {a.saved_share:.1%}")

with open(os.path.join(os.environ.get("OUT", "/tmp/out"), "gpu_bound_path.json"), "w") as f:
    json.dump(figures, f, indent=1)
print("GPU-BOUND PATH " + ("FAILED: " + "; ".join(failed) if failed else "OK"))
sys.exit(1 if failed else 0)
PY
