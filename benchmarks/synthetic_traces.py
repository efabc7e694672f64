"""Synthetic GPU training traces shaped like torch's, from 10k to millions of events (#43).

One gzipped Kineto JSON per call, as ``torch.profiler`` writes it on a CUDA machine:
``schemaVersion``, ``deviceProperties`` (one A100), ``distributedInfo`` and
``traceEvents``. The main thread runs layers of ops (``aten::linear`` over ``aten::t`` and
``aten::addmm``, ``aten::relu``, ``aten::view``, ``aten::empty``, ``aten::add_``), each
GPU op launching its kernel through ``cudaLaunchKernel`` (``args.correlation`` shared with
the kernel; ``ac2g`` flow arrows between them, optional). Every ``SIDE_EVERY`` events a
side op runs on a second stream, joined both ways by ``cudaEventRecord`` +
``cudaStreamWaitEvent``; every ``SYNC_EVERY`` events come one ``.item()``
(``aten::item`` > ``aten::_local_scalar_dense`` > ``cudaMemcpyAsync`` +
``cudaStreamSynchronize``, a 4-byte device-to-host copy) and, half-way between them, one
``cudaDeviceSynchronize``. The GPU is simulated: a kernel starts after its launch plus a
launch latency, after the work before it on its stream, and after what its stream waits
for; a blocking call ends once the work it waits for has. Kernel times are drawn so that
the GPU is partly busy (about 70% of the span) and queues build behind the longer GEMMs
(about half the launches find their stream busy, the longest waits 0.1 to 0.2 ms).

``steps=None`` writes one window (no ``ProfilerStep``: a ``with profile():`` around a loop
that never calls ``prof.step()``); ``steps=N`` writes the very same events split by ``N``
``ProfilerStep#k`` ranges (the one extra event each), so the two shapes differ only in
their iteration markers.

``events`` is the number of complete (``"ph": "X"``) events of ops, runtime calls and GPU
work asked for, what kernelmagic's table holds (whole layers: up to about 30 more);
``ProfilerStep`` ranges, metadata, flow arrows and the profiler's own span are written
besides. Deterministic from ``seed``: the same arguments write the same bytes.
About 4 s per million events here (a plain loop writing JSON text, gzipped at level 1 by
python-isal): 300 MB of JSON, 29 MB gzipped. ``cached_trace`` keeps each file in the
temporary folder, keyed by (version, events, shape, seed).

    python benchmarks/synthetic_traces.py OUT.json.gz --events 1000000 [--steps 500]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

#: Bump when the generated traces change, so that cached files are written again.
VERSION = 2
SYNC_EVERY = 2_000  # one .item() and one cudaDeviceSynchronize per this many events
SIDE_EVERY = 100  # one side-stream op (two cudaStreamWaitEvent) per this many events
MAIN_STREAM, SIDE_STREAM = 7, 20
PID = TID = 4242
T0_NS = 1_700_000_000_000_000_000 // 1000 * 1000  # an epoch-like start, in ns
DEVICE = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_096_251_392,
          "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024,
          "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
          "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
          "sharedMemPerMultiprocessor": 167936, "numSms": 108,
          "sharedMemPerBlockOptin": 166912}
GEMM = "ampere_sgemm_128x64_tn"
RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)"
        "::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
        "at::native::detail::ClampLimits)::{lambda(float)#1}, at::detail::Array<char*, 2> >")
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3>)")
MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, "
       "float, float, at::native::binary_internal::MulFunctor<float> >, "
       "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, float, float, "
       "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)")
DTOH = "Memcpy DtoH (Device -> Pageable)"
CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaStreamSynchronize": 131,
        "cudaDeviceSynchronize": 165, "cudaEventRecord": 135, "cudaStreamWaitEvent": 147}


@dataclass(frozen=True)
class TraceFacts:
    """What the generator wrote, counted as it wrote it (for checks and the benchmark)."""

    path: str
    events: int  # complete events of ops, runtime calls and GPU work, step ranges included
    steps: int  # ProfilerStep ranges (0: one window)
    kernels: int  # kernel events (the .item() copies are gpu_memcpy, not counted here)
    memcpys: int
    launches: int  # runtime calls with GPU work (cudaLaunchKernel, cudaMemcpyAsync)
    device_syncs: int  # cudaDeviceSynchronize
    items: int  # .item() calls (each one cudaStreamSynchronize)
    stream_waits: int  # cudaStreamWaitEvent
    span_us: float  # first event's start to the last one's end
    gpu_busy_us: float  # the union of GPU work over both streams
    json_bytes: int


def _us(ns: int) -> str:
    """ns as Kineto writes µs: three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


class _Writer:
    """Writes the events of one trace as JSON text and simulates its GPU."""

    def __init__(self, write: Callable[[str], None], rng: random.Random, flows: bool,
                 python: bool) -> None:
        self.write, self.rng, self.flows, self.python = write, rng, flows, python
        self.now = T0_NS  # the main thread's clock
        self.free = {MAIN_STREAM: T0_NS, SIDE_STREAM: T0_NS}  # when each stream's queue ends
        self.waits = {MAIN_STREAM: T0_NS, SIDE_STREAM: T0_NS}  # what each stream waits for
        self.recorded = T0_NS
        self.ext = self.corr = self.events = self.pyid = 0
        self.counts = {"kernels": 0, "memcpys": 0, "launches": 0, "device_syncs": 0,
                       "items": 0, "stream_waits": 0}
        self.gpu: list[tuple[int, int]] = []
        self.first = True
        self.json_bytes = 0

    # --- low level -----------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        line = text if self.first else ",\n" + text
        self.first = False
        self.json_bytes += len(line)
        self.write(line)

    def _x(self, cat: str, name: str, pid: int, tid: int, start: int, end: int,
           args: str) -> None:
        self._emit(f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, '
                   f'"tid": {tid}, "ts": {_us(start)}, "dur": {_us(end - start)}, '
                   f'"args": {{{args}}}}}')
        self.events += 1

    def _draw(self, low_us: float, high_us: float) -> int:
        return int(self.rng.uniform(low_us, high_us) * 1000)

    def _lognormal(self, median_us: float, sigma: float) -> int:
        return max(1000, int(self.rng.lognormvariate(math.log(median_us), sigma) * 1000))

    # --- the CPU ---------------------------------------------------------------------------

    def op(self, name: str, body: Callable[[], None] | None = None, self_us: float = 3.0,
           ) -> None:
        """A ``cpu_op`` at the current time on the main thread, ``body`` run inside it."""
        self.ext += 1
        ext, start = self.ext, self.now
        self.now += self._draw(0.5 * self_us, 1.0 * self_us)
        if body is not None:
            body()
        self.now += self._draw(0.3, 0.5 * self_us + 0.3)
        self._x("cpu_op", name, PID, TID, start, self.now,
                f'"External id": {ext}, "Record function id": 0, "Ev Idx": {ext - 1}')

    def runtime(self, name: str, dur: int | None = None) -> tuple[int, int, int]:
        """A ``cuda_runtime`` call now; its (start, end, correlation)."""
        self.corr += 1
        start = self.now
        self.now += dur if dur is not None else self._draw(2.5, 7.0)
        self._x("cuda_runtime", name, PID, TID, start, self.now,
                f'"External id": {self.ext}, "cbid": {CBID[name]}, "correlation": {self.corr}')
        return start, self.now, self.corr

    def gap(self) -> None:
        """Python between two top-level ops."""
        self.now += self._draw(1.0, 6.0)

    # --- the GPU ---------------------------------------------------------------------------

    def _queue(self, stream: int, launched: int, dur: int) -> tuple[int, int]:
        """Start and end of work launched at ``launched`` on ``stream``: after the launch
        latency, the work before it and what the stream waits for."""
        start = max(launched + self._draw(2.0, 6.0), self.free[stream] + 1000,
                    self.waits[stream])
        self.free[stream] = start + dur
        self.gpu.append((start, start + dur))
        return start, start + dur

    def _flow(self, corr: int, launched: int, stream: int, start: int) -> None:
        if self.flows:
            self._emit(f'{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {TID}, '
                       f'"ts": {_us(launched)}, "cat": "ac2g", "name": "ac2g"}}')
            self._emit(f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, '
                       f'"ts": {_us(start)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}')

    def launch(self, kernel: str, dur: int, stream: int = MAIN_STREAM,
               grid: str = "[1024, 1, 1]") -> None:
        launched, _, corr = self.runtime("cudaLaunchKernel")
        start, end = self._queue(stream, launched, dur)
        self._device("kernel", kernel, stream, start, end, corr, launched,
                     '"queued": 0, "registers per thread": 32, "shared memory": 0, '
                     '"blocks per SM": 9.48, "warps per SM": 37.9, '
                     f'"grid": {grid}, "block": [128, 1, 1], "est. achieved occupancy %": 59')
        self.counts["kernels"] += 1

    def _device(self, cat: str, name: str, stream: int, start: int, end: int, corr: int,
                launched: int, extra: str) -> None:
        """GPU work and its flow arrow from the launch, as torch writes them."""
        self._x(cat, name, 0, stream, start, end,
                f'"External id": {self.ext}, "device": 0, "context": 1, '
                f'"stream": {stream}, "correlation": {corr}, {extra}')
        self._flow(corr, launched, stream, start)
        self.counts["launches"] += 1

    # --- the blocks ------------------------------------------------------------------------

    def linear(self) -> None:
        def t() -> None:
            self.op("aten::transpose", lambda: self.op("aten::as_strided", self_us=1.5),
                    self_us=2.0)

        def body() -> None:
            self.op("aten::t", t, self_us=2.0)
            self.op("aten::addmm", lambda: self.launch(GEMM, self._lognormal(26.0, 0.7),
                                                       grid="[8, 64, 1]"), self_us=6.0)
        self.op("aten::linear", body, self_us=3.0)

    def elementwise(self, name: str, kernel: str, median_us: float) -> None:
        self.op(name, lambda: self.launch(kernel, self._lognormal(median_us, 0.4)),
                self_us=4.0)

    def side(self) -> None:
        """A side op on the second stream, joined both ways by stream waits."""
        self.runtime("cudaEventRecord")
        self.recorded = self.free[MAIN_STREAM]
        self._wait(SIDE_STREAM)
        self.elementwise_on_side()
        self.runtime("cudaEventRecord")
        self.recorded = self.free[SIDE_STREAM]
        self._wait(MAIN_STREAM)

    def elementwise_on_side(self) -> None:
        self.op("aten::mul", lambda: self.launch(MUL, self._lognormal(12.0, 0.5), SIDE_STREAM),
                self_us=4.0)

    def _wait(self, stream: int) -> None:
        self.runtime("cudaStreamWaitEvent", self._draw(1.5, 3.0))
        self.waits[stream] = max(self.waits[stream], self.recorded)
        self.counts["stream_waits"] += 1

    def item(self) -> None:
        """``loss.item()``: a 4-byte copy to the host on the main stream, then its sync."""
        def dense() -> None:
            launched, _, corr = self.runtime("cudaMemcpyAsync")
            start, end = self._queue(MAIN_STREAM, launched, self._draw(1.5, 2.5))
            self._device("gpu_memcpy", DTOH, MAIN_STREAM, start, end, corr, launched,
                         '"bytes": 4, "memory bandwidth (GB/s)": 0.002')
            self.counts["memcpys"] += 1
            self._blocking("cudaStreamSynchronize", self.free[MAIN_STREAM])

        self.op("aten::item", lambda: self.op("aten::_local_scalar_dense", dense, 3.0), 2.0)
        self.counts["items"] += 1

    def device_sync(self) -> None:
        self._blocking("cudaDeviceSynchronize", max(self.free.values()))
        self.counts["device_syncs"] += 1

    def _blocking(self, name: str, until: int) -> None:
        """A blocking call that returns once the GPU reaches ``until``."""
        start = self.now
        self.runtime(name, max(self._draw(1.5, 3.0), until - start + self._draw(1.0, 3.0)))

    def python_frame(self, block: Callable[[], None], name: str) -> None:
        """``block`` under a ``python_function`` frame (``python=True``)."""
        if not self.python:
            block()
            return
        self.pyid += 1
        start, pyid = self.now, self.pyid
        self.now += 500
        block()
        self.now += 500
        self._x("python_function", name, PID, TID, start, self.now,
                f'"Python parent id": 0, "Python id": {pyid}, "Python module id": 0')


def _layer(w: _Writer, size: int, next_side: list[int], next_sync: list[int]) -> None:
    """One layer of the model, with the side op and the syncs when their turn has come."""
    for block, name in ((w.linear, "nn.Module: Linear"),
                        (lambda: w.elementwise("aten::relu", RELU, 6.0), "nn.Module: ReLU"),
                        (lambda: w.op("aten::view", self_us=3.0), "torch/nn/functional.py"),
                        (lambda: w.op("aten::empty", self_us=3.0), "torch/nn/functional.py"),
                        (lambda: w.elementwise("aten::add_", ADD, 7.0), "torch/_tensor.py")):
        w.python_frame(block, name)
        w.gap()
    if w.events >= next_side[0]:
        w.side()
        w.gap()
        next_side[0] += SIDE_EVERY
    if w.events >= next_sync[0] and w.events < size:
        turn = next_sync[0] // (SYNC_EVERY // 2)
        (w.item if turn % 2 else w.device_sync)()
        w.gap()
        next_sync[0] += SYNC_EVERY // 2


def write_trace(path: str | os.PathLike[str], events: int, *, steps: int | None,
                seed: int = 0, flows: bool = True, python: bool = False) -> TraceFacts:
    """Write a gzipped synthetic trace of about ``events`` events to ``path`` (see the
    module's docstring); ``steps``: split into that many ``ProfilerStep#k`` ranges (None:
    one window); ``flows``: ``ac2g`` arrows; ``python``: ``python_function`` frames."""
    from isal import igzip  # a kernelmagic dependency: about 3x zlib's speed here

    path = Path(path)
    chunks: list[str] = []
    header = json.dumps({"schemaVersion": 1, "deviceProperties": [DEVICE],
                         "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
                         "traceName": path.name})[:-1] + ', "traceEvents": [\n'
    with igzip.open(path, "wt", compresslevel=1, encoding="utf-8") as out:
        out.write(header)
        w = _Writer(chunks.append, random.Random(seed), flows, python)
        step_events = _step_marks(events, steps)
        next_side, next_sync = [SIDE_EVERY // 2], [SYNC_EVERY // 2]
        step_starts: list[int] = [w.now]
        step_ends: list[int] = []
        while w.events < events:
            _layer(w, events, next_side, next_sync)
            if step_events and len(step_ends) < len(step_events) - 1 and (
                    w.events >= step_events[len(step_ends)]):
                step_ends.append(w.now)  # the next step begins where this one ends
                step_starts.append(w.now)
            if len(chunks) > 4096:
                out.write("".join(chunks))
                chunks.clear()
        w.device_sync()  # the run ends with the GPU drained, as a loop's last .item() does
        step_ends.append(w.now)
        for k, (start, end) in enumerate(zip(step_starts, step_ends, strict=True)):
            if steps is not None:
                w._x("user_annotation", f"ProfilerStep#{k}", PID, TID, start, end,
                     f'"External id": {w.ext + 1 + k}, "Record function id": 0')
        _metadata(w)
        out.write("".join(chunks))
        out.write("\n]}\n")
    facts = TraceFacts(path=str(path), events=w.events, steps=steps or 0,
                       span_us=(w.now - T0_NS) / 1000, gpu_busy_us=_union(w.gpu) / 1000,
                       json_bytes=w.json_bytes + len(header), **w.counts)
    return facts


def _step_marks(events: int, steps: int | None) -> list[int]:
    """The event counts at which each step ends (empty: one window)."""
    if steps is None:
        return []
    if steps < 1:
        raise ValueError("steps must be at least 1 (or None: one window)")
    per = events / steps
    return [round(per * (k + 1)) for k in range(steps)]


def _metadata(w: _Writer) -> None:
    """Process and thread names and the profiler's own span, as torch writes them."""
    for pid, tid, kind, value in ((PID, 0, "process_name", "python3"),
                                  (PID, 0, "process_labels", "CPU"),
                                  (0, 0, "process_name", "python3"),
                                  (0, 0, "process_labels", "GPU 0"),
                                  (PID, TID, "thread_name", "thread 4242 (python3)"),
                                  (0, MAIN_STREAM, "thread_name", f"stream {MAIN_STREAM}"),
                                  (0, SIDE_STREAM, "thread_name", f"stream {SIDE_STREAM}")):
        key = "labels" if kind == "process_labels" else "name"
        w._emit(f'{{"name": "{kind}", "ph": "M", "ts": {_us(T0_NS)}, "pid": {pid}, '
                f'"tid": {tid}, "args": {{"{key}": "{value}"}}}}')
    w._emit(f'{{"ph": "X", "cat": "Trace", "ts": {_us(T0_NS)}, "dur": {_us(w.now - T0_NS)}, '
            f'"pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", '
            f'"args": {{"Op count": 0}}}}')


def _union(intervals: list[tuple[int, int]]) -> int:
    """Total length of the union of ``intervals`` (ns)."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def cache_folder() -> Path:
    """Where ``cached_trace`` keeps its files (the temporary folder's ``km_synthetic``)."""
    return Path(tempfile.gettempdir()) / "km_synthetic"


def cached_trace(events: int, steps: int | None, seed: int = 0) -> TraceFacts:
    """``write_trace``'s facts for these arguments, written once: each trace alone in a
    folder of its own keyed by (version, events, shape, seed) (HTA reads every file of a
    folder), its facts beside the folder."""
    shape = "window" if steps is None else f"steps{steps}"
    key = f"v{VERSION}-{events}-{shape}-seed{seed}"
    folder = cache_folder() / key
    path, facts_file = folder / "trace.json.gz", cache_folder() / f"{key}.facts.json"
    if facts_file.exists() and path.exists():
        return TraceFacts(**json.loads(facts_file.read_text()))
    folder.mkdir(parents=True, exist_ok=True)
    partial = cache_folder() / f".writing-{key}-{os.getpid()}.json.gz"
    facts = write_trace(partial, events, steps=steps, seed=seed)
    partial.replace(path)
    facts = TraceFacts(**{**asdict(facts), "path": str(path)})
    facts_file.write_text(json.dumps(asdict(facts)))
    return facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-flows", action="store_true")
    parser.add_argument("--python", action="store_true")
    args = parser.parse_args()
    facts = write_trace(args.out, args.events, steps=args.steps, seed=args.seed,
                        flows=not args.no_flows, python=args.python)
    print(json.dumps(asdict(facts), indent=1))


if __name__ == "__main__":
    main()
