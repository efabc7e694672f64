"""Benchmark: peak memory of opening a large trace, against the file's size.

Writes a synthetic Kineto trace of about ``--mb`` megabytes (uncompressed JSON; events
shaped like the real A100/V100 traces: nested ``cpu_op``s, ``cuda_runtime`` launches,
``kernel``s with their args, ``ac2g`` flows, fractional µs timestamps), then opens it with
``kernelmagic.load`` in a fresh interpreter and reads that process's peak RSS: the
kernel's high-water mark of its memory map (``VmHWM`` in ``/proc/self/status``), not
``getrusage(RUSAGE_SELF).ru_maxrss``, which on Linux keeps the parent's peak across
fork and exec (the parent here has torch imported). The baseline is the same child's RSS
after its imports, just before loading. Target: peak well under 10x the file size.

    python benchmarks/bench_trace_memory.py [--mb 1000] [--keep PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import _common as c

TARGET_RATIO = 10.0

CHILD = """\
import json, sys, time
import kernelmagic
from kernelmagic.io import traces as trace_result
from kernelmagic.sources import trace_file
import numpy  # imported by the reader anyway: counted in the baseline
def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
base = status("VmRSS")
t0 = time.perf_counter()
result = kernelmagic.load(sys.argv[1])
seconds = time.perf_counter() - t0
peak = status("VmHWM")
print(json.dumps({"base": base, "peak": peak, "seconds": seconds, "rows": len(result.rows),
                  "kernels": sum(k.count for k in result.kernels), "iters": result.iters}))
"""

_OPS = [("aten::linear", "aten::addmm", "volta_sgemm_128x64_nn"),
        ("aten::relu", "aten::clamp_min", "void at::native::vectorized_elementwise_kernel<4, "
         "at::native::(anonymous namespace)::clamp_min_kernel_cuda>(int, float*, float*)"),
        ("aten::add", "aten::add_", "void at::native::vectorized_elementwise_kernel<4, "
         "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, "
         "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")]


def _event_lines(n_groups: int, start_us: int = 1712195495400000):
    """One step of ``n_groups`` op groups per ~1000 groups; 7 events and 2 flows per group."""
    pid, tid = 1102, 1102
    t = start_us * 1000  # ns
    corr = 100000
    ext = 1
    group = 0
    step = 0
    while group < n_groups:
        step_groups = min(1000, n_groups - group)
        step_start = t
        lines = []
        for _ in range(step_groups):
            outer, inner, kernel = _OPS[group % len(_OPS)]
            o0, i0, r0 = t, t + 2313, t + 4121
            r1, i1, o1 = r0 + 5287, r0 + 6911, r0 + 8442
            k0 = r0 + 21007
            corr += 1
            ext += 2

            def us(ns: int) -> str:
                return f"{ns // 1000}.{ns % 1000:03d}"

            lines.append(
                f'{{"ph": "X", "cat": "cpu_op", "name": "{outer}", "pid": {pid}, "tid": {tid}, '
                f'"ts": {us(o0)}, "dur": {us(o1 - o0)}, "args": {{"External id": {ext}, '
                f'"Sequence number": {ext}, "Fwd thread id": 0, "Ev Idx": {ext}}}}}')
            lines.append(
                f'{{"ph": "X", "cat": "cpu_op", "name": "{inner}", "pid": {pid}, "tid": {tid}, '
                f'"ts": {us(i0)}, "dur": {us(i1 - i0)}, "args": {{"External id": {ext + 1}, '
                f'"Sequence number": {ext}, "Fwd thread id": 0, "Ev Idx": {ext + 1}}}}}')
            lines.append(
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {pid}, '
                f'"tid": {tid}, "ts": {us(r0)}, "dur": {us(r1 - r0)}, "args": {{'
                f'"External id": {ext + 1}, "cbid": 211, "correlation": {corr}}}}}')
            lines.append(
                f'{{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {us(r0)}, '
                f'"cat": "ac2g", "name": "ac2g"}}')
            lines.append(
                f'{{"ph": "X", "cat": "kernel", "name": "{kernel}", "pid": 0, "tid": 7, '
                f'"ts": {us(k0)}, "dur": {us(6543)}, "args": {{"External id": {ext + 1}, '
                f'"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {corr}, '
                f'"registers per thread": 72, "shared memory": 0, "blocks per SM": 0.5, '
                f'"warps per SM": 2.0, "grid": [40, 1, 1], "block": [128, 1, 1], '
                f'"est. achieved occupancy %": 3}}}}')
            lines.append(
                f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {us(k0)}, '
                f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
            t = o1 + 1777
            group += 1
        ts, dur = step_start, t - step_start
        lines.insert(0,
                     f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                     f'"pid": {pid}, "tid": {tid}, "ts": {ts // 1000}.{ts % 1000:03d}, '
                     f'"dur": {dur // 1000}.{dur % 1000:03d}, "args": {{"External id": 0}}}}')
        step += 1
        yield lines


def write_trace(path: Path, megabytes: float) -> tuple[int, int]:
    """Write about ``megabytes`` MB of trace JSON; (bytes written, events)."""
    target = int(megabytes * 1e6)
    head = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": '
            '"Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0}],\n'
            '  "traceEvents": [\n')
    tail = ('\n  ],\n  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
            '  "traceName": "synthetic"\n}\n')
    written, events = 0, 0
    per_group = 1370  # bytes of JSON per op group, about
    groups = max(1, (target - len(head) - len(tail)) // per_group)
    with open(path, "w", encoding="utf-8") as out:
        out.write(head)
        first = True
        for lines in _event_lines(groups):
            chunk = (",\n    " if not first else "    ") + ",\n    ".join(lines)
            first = False
            out.write(chunk)
            written += len(chunk)
            events += len(lines)
        out.write(tail)
    return path.stat().st_size, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1000.0,
                        help="size of the synthetic trace in MB (default 1000)")
    parser.add_argument("--dir", default=None, help="where to write it (default: a temp dir)")
    args = parser.parse_args()
    c.header("trace memory: peak RSS of kernelmagic.load against the trace's size",
             f"    synthetic Kineto trace of about {args.mb:g} MB (uncompressed JSON)")
    folder = Path(tempfile.mkdtemp(prefix="km_trace_mem_", dir=args.dir))
    try:
        free = shutil.disk_usage(folder).free
        if free < 2.5 * args.mb * 1e6:
            raise SystemExit(f"only {free / 1e9:.1f} GB free in {folder}: use --mb or --dir")
        path = folder / "big.pt.trace.json"
        t0 = time.perf_counter()
        size, events = write_trace(path, args.mb)
        print(f"    wrote {size / 1e6:.0f} MB, {events:,} events in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        child = c.run_child(CHILD.replace("sys.argv[1]", repr(str(path))), timeout=3600)
        peak, base = child["peak"], child["base"]
        print(f"    loaded in {child['seconds']:.1f} s: {child['iters']} iterations, "
              f"{child['rows']} op rows, {child['kernels']:,} kernels")
        print(f"    child RSS after imports {base / 1e6:.0f} MB, peak {peak / 1e6:.0f} MB "
              f"(+{(peak - base) / 1e6:.0f} MB while loading)")
        ratio = peak / size
        c.verdict("trace_memory", f"peak RSS / file size ({size / 1e6:.0f} MB trace)",
                  km=peak / 1e6, unit="MB", ratio=ratio,
                  target=f"< {TARGET_RATIO:g}x the file", passed=ratio < TARGET_RATIO,
                  note=f"{(peak - base) / size:.2f}x above the imports' {base / 1e6:.0f} MB; "
                       f"{events:,} events, {child['seconds']:.1f} s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.sync()


if __name__ == "__main__":
    main()
