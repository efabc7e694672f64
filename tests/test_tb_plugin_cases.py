"""The TensorBoard profiler plugin's own cases, with its expected per-op figures.

Source: ``tb_plugin/test/test_profiler.py`` in pytorch/kineto
(https://github.com/pytorch/kineto), BSD 3-Clause License, Copyright (c) 2020, pytorch;
the licence is in ``tests/data/NOTICE``. Its small hand-written traces (the plugin calls
them simulations, not recorded events) and its expected numbers are transcribed here as
data; the code is ours. Ported: every case whose trace is inline JSON and whose expected
numbers are per-op or per-kernel figures (or, for a case without GPU work, per-step
times). Left out: step cost breakdowns (the plugin's own "ProfileRole" categories, with
steps stretched to their GPU work), SM efficiency and occupancy, memory curves, the
module view and the multi-worker distributed views.

Each case runs in both category generations (the plugin's ``Operator``, ``Runtime``,
``Kernel``, ``Memcpy``, ``Memset``, ``external id``; today's ``cpu_op``, ``cuda_runtime``,
``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``External id``) and with three spellings of
the ids: as the plugin writes them (``"tid": "123"``, ``"tid": "stream 7"``, integer
``pid``), all integers, and all strings (``pid``, ``tid``, ``args`` ``stream``,
``device``, ``correlation`` and external ids).

How the plugin's figures map to ours (``ProfileResult.rows``: ``OpRow``, µs):

- ``calls`` -> ``count``; ``host_duration`` -> ``cpu_time_total``;
  ``self_host_duration`` -> ``self_cpu_time_total``; ``device_duration`` ->
  ``device_time_total``; ``self_device_duration`` -> ``self_device_time_total``.
- ``op_list_groupby_name`` (operators only) -> our op rows that are not runtime calls:
  kernelmagic lists runtime calls (``cudaLaunchKernel``) as rows, as torch's
  ``key_averages()`` does, and ranges that own GPU work as rows of ``kind`` "range".
- ``kernel_stat`` (per kernel name, ``Kernel`` events only) ``count``/``sum`` ->
  ``KernelRow.count``/``device_time_total`` (our kernels view also lists memcpy and
  memset); ``kernel_list_groupby_name_op[i].op_name`` -> ``KernelRow.launched_by`` when one
  op launched them all.
- memory (``memory_stats``: "self increase size", "increase size", calls) ->
  ``self_cpu_memory_usage``/``cpu_memory_usage`` ("CPU") and
  ``self_device_memory_usage``/``device_memory_usage`` ("GPU0"), ``count``.
- ``gpu_utilization`` -> ``gpu_busy[i] / timings[i]`` (GPU busy time over the iteration).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

import kernelmagic
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_file import read_table

PID = 13721  # the plugin's host process
NLL = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
GEMM = "void gemmSN_TN_kernel_64addr"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"
MEMSET = "Memset (Device)"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
TO_DIMS = [[2, 8, 5], [], [], [], [], [], [], []]
NLL_DIMS = [[], [32, 1000], [32], [], [], [], []]


# --- the plugin's trace events, as it writes them --------------------------------------


def op(name: str, tid: str, ts: int, dur: int, ext: int, dims: list | None = None) -> dict:
    """An operator (or ProfilerStep / DataLoader range): category ``Operator``."""
    args: dict = {"Input Dims": dims if dims is not None else [], "External id": ext}
    return {"ph": "X", "cat": "Operator", "name": name, "pid": PID, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def runtime(name: str, tid: str, ts: int, dur: int, corr: int, ext: int) -> dict:
    return {"ph": "X", "cat": "Runtime", "name": name, "pid": PID, "tid": tid, "ts": ts,
            "dur": dur, "args": {"correlation": corr, "external id": ext}}


def launch(tid: str, ts: int, dur: int, corr: int, ext: int) -> dict:
    return runtime("cudaLaunchKernel", tid, ts, dur, corr, ext)


def gpu(cat: str, name: str, stream: int, ts: int, dur: int, corr: int, ext: int, *,
        pid: int = 0, device: int | None = 0, stream_arg: bool = False, **extra) -> dict:
    """A ``Kernel``/``Memcpy``/``Memset`` on lane ``"stream N"``, as the plugin writes it."""
    args: dict = {}
    if stream_arg:
        args["stream"] = stream
    args.update({"correlation": corr, "external id": ext})
    if device is not None:
        args["device"] = device
    args.update(extra)
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": f"stream {stream}",
            "ts": ts, "dur": dur, "args": args}


def memory(ts: int, device_type: int, device_id: int, addr: int, nbytes: int) -> dict:
    """A ``[memory]`` instant (the plugin writes these with an integer ``tid``)."""
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": PID, "tid": 123, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Addr": addr,
                     "Bytes": nbytes}}


# test_all_categories
ALL_CATEGORIES = [
    op(LOADER, "123", 100, 180, 2),
    op("aten::to", "123", 200, 60, 3, TO_DIMS),
    op("aten::nll_loss_backward", "456", 340, 70, 4, NLL_DIMS),
    op("ProfilerStep#1", "123", 50, 400, 1),
    gpu("Memcpy", MEMCPY, 7, 405, 10, 334, 4, device=None, stream_arg=True),
    runtime("cudaMemcpyAsync", "456", 360, 20, 334, 4),
    gpu("Memset", MEMSET, 7, 420, 5, 40344, 4, device=None, stream_arg=True),
    runtime("cudaMemsetAsync", "456", 390, 10, 40344, 4),
    gpu("Kernel", NLL, 7, 430, 15, 40348, 4),
    launch("456", 405, 5, 40348, 4),
]

# test_external_id: zero-length launches at the very start and end of aten::mm; the
# plugin places them by External id (2: aten::mat_mul, 4: aten::mm).
EXTERNAL_ID = [
    op("aten::mat_mul", "456", 100, 100, 2),
    op("aten::mm", "456", 120, 70, 4),
    gpu("Kernel", NLL, 7, 130, 5, 334, 4),
    launch("456", 120, 0, 334, 4),
    gpu("Kernel", NLL, 7, 130, 6, 335, 2),
    launch("456", 120, 0, 335, 2),
    gpu("Kernel", NLL, 7, 130, 7, 336, 4),
    launch("456", 190, 0, 336, 4),
    gpu("Kernel", NLL, 7, 130, 8, 337, 2),
    launch("456", 190, 0, 337, 2),
]

# test_operator_relation: two ops with the same start, then with the same end.
SAME_START = [op("aten::mat_mul", "456", 100, 100, 2), op("aten::mm", "456", 100, 70, 4)]
SAME_END = [op("aten::mat_mul", "456", 100, 100, 2), op("aten::mm", "456", 130, 70, 4)]

# test_remove_dup_nodes
DUP_NODES = [
    op("aten::mm", "456", 100, 100, 2),
    op("aten::mm", "456", 110, 80, 3),
    op("aten::mm", "456", 120, 60, 4),
    launch("456", 130, 20, 335, 4),
    gpu("Kernel", GEMM, 7, 220, 8, 335, 4),
]

# test_top_level_runtime: the launch is on another thread, under no op.
TOP_LEVEL_RUNTIME = [
    op("aten::mm", "123", 100, 100, 2),
    launch("456", 130, 20, 335, 0),
    gpu("Kernel", GEMM, 7, 220, 8, 335, 0),
]

# test_runtime_called_by_profilerstep
RUNTIME_IN_STEP = [
    op("ProfilerStep#1", "456", 100, 300, 2),
    launch("456", 130, 20, 335, 2),
    gpu("Kernel", GEMM, 7, 220, 8, 335, 2),
]

# test_runtime_launch_multipe_kernels: one launch, a kernel on each of two streams. (The
# plugin's first kernel repeats "device" in its args; a dict keeps one.)
NCCL = "ncclBroadcastRingLLKernel_copy_i8(ncclColl)"
ONE_LAUNCH_TWO_KERNELS = [
    op("Broadcast", "456", 100, 300, 2),
    runtime("cudaLaunchCooperativeKernelMultiDevice", "456", 130, 20, 335, 2),
    gpu("Kernel", NCCL, 13, 160, 120318, 335, 2, stream_arg=True, context=1),
    gpu("Kernel", NCCL, 22, 170, 132800, 335, 2, stream_arg=True, context=2),
]

# test_no_profilerstep
NO_STEP = [
    op("aten::to", "123", 100, 60, 3, TO_DIMS),
    op("aten::nll_loss_backward", "456", 300, 70, 4, NLL_DIMS),
    gpu("Kernel", NLL, 7, 320, 100, 40348, 4),
    launch("456", 310, 20, 40348, 4),
]

# test_multiple_profilersteps_no_overlap
TWO_STEPS = [
    op("ProfilerStep#1", "123", 100, 200, 1),
    op("aten::to", "123", 200, 60, 2, TO_DIMS),
    op("ProfilerStep#2", "123", 350, 150, 3),
    op("aten::mm", "123", 360, 50, 4),
    gpu("Memcpy", MEMCPY, 7, 280, 40, 334, 2, device=None, stream_arg=True),
    runtime("cudaMemcpyAsync", "123", 250, 5, 334, 2),
    gpu("Kernel", NLL, 7, 410, 200, 40348, 4),
    launch("123", 400, 5, 40348, 4),
]

# test_self_time (its body is a nested function the plugin never calls: see the test)
SELF_TIME = [
    op("aten::mat_mul", "456", 100, 100, 2),
    op("aten::mm", "456", 120, 40, 4),
    gpu("Kernel", NLL, 7, 155, 20, 334, 4),
    launch("456", 150, 10, 334, 4),
    gpu("Kernel", NLL, 7, 210, 16, 335, 2),
    launch("456", 170, 25, 335, 2),
]

# test_pure_cpu
PURE_CPU = [
    op("ProfilerStep#1", "123", 100, 200, 1),
    op("aten::to", "123", 120, 10, 2, TO_DIMS),
    op("ProfilerStep#2", "123", 300, 100, 3),
    op("aten::mm", "123", 350, 40, 4),
]


def _sm(kernel: dict, blocks: float, occupancy: float) -> dict:
    kernel["args"].update({"blocks per SM": blocks, "est. achieved occupancy %": occupancy})
    return kernel


# test_gpu_utilization (device 1, process 1)
GPU_UTILIZATION = [
    op("aten::mat_mul", "456", 100, 100, 2),
    op("aten::mm", "456", 120, 70, 4),
    _sm(gpu("Kernel", NLL, 7, 130, 10, 334, 4, pid=1, device=1), 0.5, 0.6),
    launch("456", 120, 0, 334, 4),
    _sm(gpu("Kernel", GEMM, 8, 135, 15, 335, 2, pid=1, device=1), 0.6, 0.1),
    _sm(gpu("Kernel", GEMM, 8, 150, 0, 335, 2, pid=1, device=1), 0.3, 0.2),
    launch("456", 120, 0, 335, 2),
    _sm(gpu("Kernel", NLL, 7, 145, 25, 336, 4, pid=1, device=1), 0.3, 1.0),
    launch("456", 125, 3, 336, 4),
    _sm(gpu("Kernel", NLL, 7, 200, 20, 337, 2, pid=1, device=1), 10.5, 0.3),
    launch("456", 195, 1, 337, 2),
]

# test_memory_view: ops on thread "123" (a string), memory records on thread 123 (an int).
MEMORY_VIEW = [
    op("aten::to", "123", 10, 10, 2),
    op(LOADER, "123", 100, 180, 2),
    op("aten::to", "123", 200, 60, 3, TO_DIMS),
    op("aten::nll_loss_backward", "123", 340, 70, 4, NLL_DIMS),
    op("ProfilerStep#1", "123", 50, 400, 1),
    op("ProfilerStep#2", "123", 500, 500, 1),
    op("aten::to", "123", 510, 150, 3, TO_DIMS),
    op("aten::copy_", "123", 520, 100, 3, TO_DIMS),
    op("aten::liner", "123", 700, 100, 3, TO_DIMS),
    op("aten::t", "123", 705, 40, 3, TO_DIMS),
    op("aten::transpose", "123", 710, 30, 3, TO_DIMS),
    op("aten::tranas_stride", "123", 720, 10, 3, TO_DIMS),
    op("aten::addmm", "123", 750, 40, 3, TO_DIMS),
    op("aten::to", "123", 900, 100, 3, TO_DIMS),
    gpu("Memcpy", MEMCPY, 7, 405, 10, 334, 4, device=None, stream_arg=True),
    runtime("cudaMemcpyAsync", "456", 360, 20, 334, 4),
    gpu("Memset", MEMSET, 7, 420, 5, 40344, 4, device=None, stream_arg=True),
    runtime("cudaMemsetAsync", "456", 390, 10, 40344, 4),
    gpu("Kernel", NLL, 7, 430, 15, 40348, 4),
    launch("456", 405, 5, 40348, 4),
    *(memory(*m) for m in [
        (90, 0, -1, 90, 4), (150, 0, -1, 150, 4), (200, 0, -1, 200, 4),
        (210, 1, 0, 210, 4), (265, 1, 0, 265, 4), (300, 1, 0, 300, 4),
        (350, 1, 0, 350, 10), (360, 1, 0, 350, -10), (450, 0, -1, 450, 1000000),
        (515, 1, 0, 515, 100), (520, 1, 0, 520, 100), (600, 1, 0, 520, -100),
        (690, 1, 0, 690, 100), (701, 1, 0, 701, 100), (796, 1, 0, 515, -100),
        (708, 1, 0, 708, 100), (742, 1, 0, 708, -100), (715, 1, 0, 715, 50),
        (735, 1, 0, 715, -50), (725, 1, 0, 725, 50), (728, 1, 0, 725, -50),
        (729, 0, -1, 729, 50), (746, 0, -1, 746, 100), (747, 1, 0, 747, 20),
        (749, 0, -1, 690, -100), (760, 1, 0, 760, 30), (780, 1, 0, 760, -30),
        (795, 1, 0, 795, 10), (799, 1, 0, 795, -10),
    ]),
]


def _dims(kernel: dict, grid: list | None, block: list | None, regs: int | None,
          smem: int | None) -> dict:
    for key, value in (("grid", grid), ("block", block), ("registers per thread", regs),
                       ("shared memory", smem)):
        if value is not None:
            kernel["args"][key] = value
    return kernel


# test_group_by_kernel_columns: op1 on thread "123"; every launch on thread "456".
KERNEL_COLUMNS = [
    op("op1", "123", 200, 60, 3, TO_DIMS),
    op("op2", "456", 340, 70, 4, NLL_DIMS),
    _dims(gpu("Kernel", "kernel1", 7, 230, 15, 1000, 3), [16, 1, 1], [16, 16, 16], 18, 0),
    launch("456", 210, 5, 1000, 3),
    _dims(gpu("Kernel", "kernel1", 7, 250, 10, 1001, 3), [16, 1, 1], [16, 16, 16], 18, 0),
    launch("456", 215, 5, 1001, 3),
    _dims(gpu("Kernel", "kernel1", 7, 250, 13, 1002, 3), [16, 1, 1], [16, 16, 64], 18, 0),
    launch("456", 220, 5, 1002, 3),
    _dims(gpu("Kernel", "kernel1", 7, 250, 17, 1003, 4), [16, 1, 1], [16, 16, 64], 18, 0),
    launch("456", 350, 5, 1003, 4),
]

# test_group_by_kernel_columns_invalid_input: each kernel lacks some of those fields.
KERNEL_COLUMNS_MISSING = [
    op("op1", "123", 200, 60, 3, TO_DIMS),
    _dims(gpu("Kernel", "kernel1", 7, 220, 1, 1000, 3), None, [16, 16, 16], 18, 0),
    launch("456", 210, 5, 1000, 3),
    _dims(gpu("Kernel", "kernel1", 7, 230, 2, 1001, 3), [16, 1, 1], None, 18, 0),
    launch("456", 220, 5, 1001, 3),
    _dims(gpu("Kernel", "kernel1", 7, 240, 3, 1002, 3), [16, 1, 1], [16, 16, 16], None, 0),
    launch("456", 230, 5, 1002, 3),
    _dims(gpu("Kernel", "kernel1", 7, 250, 4, 1003, 3), [16, 1, 1], [16, 16, 16], 18, None),
    launch("456", 240, 5, 1003, 3),
    gpu("Kernel", "kernel1", 7, 260, 5, 1004, 3),
    launch("456", 250, 5, 1004, 3),
]

# test_tensor_core
VOLTA = "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1"
TENSOR_CORE = [
    op("aten::conv2d", "123", 200, 100, 3, [[]]),
    op("op_no_tc", "123", 205, 10, 4, [[]]),
    op("aten::cudnn_convolution", "123", 215, 10, 5, [[]]),
    gpu("Kernel", "kernel_no_tc", 7, 210, 10, 1000, 4),
    launch("123", 205, 5, 1000, 4),
    gpu("Kernel", VOLTA, 7, 220, 15, 1001, 5),
    launch("123", 215, 5, 1001, 5),
]

CASES = {
    "all_categories": ALL_CATEGORIES, "external_id": EXTERNAL_ID, "same_start": SAME_START,
    "same_end": SAME_END, "remove_dup_nodes": DUP_NODES, "top_level_runtime": TOP_LEVEL_RUNTIME,
    "runtime_called_by_profilerstep": RUNTIME_IN_STEP,
    "runtime_launch_multiple_kernels": ONE_LAUNCH_TWO_KERNELS, "no_profilerstep": NO_STEP,
    "multiple_profilersteps_no_overlap": TWO_STEPS, "self_time": SELF_TIME,
    "pure_cpu": PURE_CPU, "gpu_utilization": GPU_UTILIZATION, "memory_view": MEMORY_VIEW,
    "group_by_kernel_columns": KERNEL_COLUMNS,
    "group_by_kernel_columns_invalid_input": KERNEL_COLUMNS_MISSING,
    "tensor_core": TENSOR_CORE,
}


# --- the forms each case is written in ---------------------------------------------------

NEW_CATEGORIES = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
                  "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}
GENERATIONS = ("old", "new")
IDS = ("as written", "ints", "strings")
_ID_ARGS = ("stream", "device", "correlation", "External id", "external id")


def translate(events: list[dict], generation: str, ids: str) -> list[dict]:
    """``events`` in the other category generation and/or another spelling of their ids.

    ``generation`` "new": today's categories, and ``External id`` in place of the plugin's
    lower-case ``external id``. ``ids`` "ints": every ``pid``/``tid`` an integer (a GPU
    lane is its stream number); "strings": every ``pid``/``tid`` and id in ``args`` a
    string (GPU lanes stay ``"stream N"``).
    """
    out = []
    for event in copy.deepcopy(events):
        args = event.get("args", {})
        if generation == "new" and "cat" in event:
            event["cat"] = NEW_CATEGORIES.get(event["cat"], event["cat"])
            if "external id" in args:
                args["External id"] = args.pop("external id")
        if ids == "ints":
            event["pid"] = int(event["pid"])
            tid = event["tid"]
            event["tid"] = int(tid[7:]) if str(tid).startswith("stream ") else int(tid)
        elif ids == "strings":
            event["pid"] = str(event["pid"])
            event["tid"] = str(event["tid"])
            for key in _ID_ARGS:
                if key in args:
                    args[key] = str(args[key])
        out.append(event)
    return out


def write(tmp_path: Path, events: list[dict]) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


@pytest.fixture(params=[(g, i) for g in GENERATIONS for i in IDS],
                ids=lambda p: f"{p[0]}-{p[1].replace(' ', '_')}")
def load(request, tmp_path):
    """``load(case)``: the case's trace, in this test's form, as a ``ProfileResult``."""
    generation, ids = request.param

    def loader(events: list[dict]):
        return kernelmagic.load(write(tmp_path, translate(events, generation, ids)))

    return loader


# --- reading our figures the plugin's way ------------------------------------------------


def is_op_row(row) -> bool:
    return getattr(row, "kind", "op") == "op"


def op_row(result, name: str):
    """The one op row named ``name``."""
    found = [r for r in result.rows if r.key == name and is_op_row(r)]
    assert len(found) == 1, (name, result.rows)
    return found[0]


def operator_names(result, events: list[dict]) -> list[str]:
    """The plugin's ``op_list_groupby_name``: our op rows that are not runtime calls."""
    calls = {e["name"] for e in events if e.get("cat") == "Runtime"}
    return sorted(r.key for r in result.rows if is_op_row(r) and r.key not in calls)


def kernel_row(result, name: str):
    found = [k for k in result.kernels if k.key == name]
    assert len(found) == 1, (name, result.kernels)
    return found[0]


def figures(row) -> tuple:
    """(calls, host, self host, device, self device), the plugin's order of checking."""
    return (row.count, row.cpu_time_total, row.self_cpu_time_total, row.device_time_total,
            row.self_device_time_total)


# --- the cases -----------------------------------------------------------------------------


def test_all_categories(load):
    result = load(ALL_CATEGORIES)
    assert operator_names(result, ALL_CATEGORIES) == ["aten::nll_loss_backward", "aten::to"]
    assert figures(op_row(result, "aten::to")) == (1, 60, 60, 0, 0)
    # self host: 70 - 20 - 10 - 5 (its three runtime calls)
    assert figures(op_row(result, "aten::nll_loss_backward")) == (1, 70, 35, 30, 30)
    kernel = kernel_row(result, NLL)
    assert (kernel.count, kernel.device_time_total) == (1, 15)
    assert kernel.launched_by == "aten::nll_loss_backward"


@pytest.mark.xfail(strict=True, reason=(
    "differs on purpose: kernelmagic gives GPU work to the innermost op around its runtime "
    "call on that call's thread, by time (torch's tree rule), and never reads External id; "
    "the plugin places these zero-length launches, at the very start and end of aten::mm, "
    "by External id. kernelmagic: aten::mm self device 5 + 6, aten::mat_mul 7 + 8"))
def test_external_id(load):
    result = load(EXTERNAL_ID)
    mat_mul, mm = op_row(result, "aten::mat_mul"), op_row(result, "aten::mm")
    assert (mat_mul.device_time_total, mat_mul.self_device_time_total) == (5 + 6 + 7 + 8, 6 + 8)
    assert (mm.device_time_total, mm.self_device_time_total) == (5 + 7, 5 + 7)


def test_external_id_total_device_time(load):
    # What holds under either rule: the four kernels are aten::mat_mul's total device time.
    result = load(EXTERNAL_ID)
    assert op_row(result, "aten::mat_mul").device_time_total == 5 + 6 + 7 + 8


@pytest.mark.parametrize("events", [SAME_START, SAME_END], ids=["same_start", "same_end"])
def test_operator_relation(load, events):
    result = load(events)
    assert op_row(result, "aten::mat_mul").self_cpu_time_total == 100 - 70
    assert op_row(result, "aten::mm").self_cpu_time_total == 70


def test_remove_dup_nodes(load):
    # Nested aten::mm in aten::mm in aten::mm: one node (torch's _remove_dup_nodes).
    result = load(DUP_NODES)
    assert operator_names(result, DUP_NODES) == ["aten::mm"]
    assert op_row(result, "aten::mm").self_device_time_total == 8


def test_top_level_runtime(load):
    # The launch is on a thread with no op open: aten::mm gets none of its GPU time.
    result = load(TOP_LEVEL_RUNTIME)
    mm = op_row(result, "aten::mm")
    assert (mm.device_time_total, mm.self_device_time_total) == (0, 0)
    assert kernel_row(result, GEMM).count == 1


def test_runtime_called_by_profilerstep(load):
    # ProfilerStep is not an operator.
    result = load(RUNTIME_IN_STEP)
    assert operator_names(result, RUNTIME_IN_STEP) == []
    assert [(k.key, k.count) for k in result.kernels] == [(GEMM, 1)]


def test_runtime_launch_multiple_kernels(load):
    result = load(ONE_LAUNCH_TWO_KERNELS)
    assert op_row(result, "Broadcast").device_time_total == 120318 + 132800
    kernel = kernel_row(result, NCCL)
    assert (kernel.count, kernel.launched_by) == (2, "Broadcast")
    assert len(result.kernels) == 1


def test_no_profilerstep(load):
    result = load(NO_STEP)
    assert operator_names(result, NO_STEP) == ["aten::nll_loss_backward", "aten::to"]
    assert figures(op_row(result, "aten::to")) == (1, 60, 60, 0, 0)
    assert figures(op_row(result, "aten::nll_loss_backward")) == (1, 70, 70 - 20, 100, 100)
    kernel = kernel_row(result, NLL)
    assert (kernel.count, kernel.device_time_total, kernel.launched_by) == \
        (1, 100, "aten::nll_loss_backward")
    # Without ProfilerStep the whole trace is one step: (320 + 100) - 100 µs.
    assert result.timings == pytest.approx([(320 + 100 - 100) / 1e6])


def test_multiple_profilersteps_no_overlap(load):
    # (The plugin's step totals stretch each step to its GPU work; ours are the steps.)
    result = load(TWO_STEPS)
    assert operator_names(result, TWO_STEPS) == ["aten::mm", "aten::to"]
    assert figures(op_row(result, "aten::to")) == (1, 60, 60 - 5, 40, 40)
    assert figures(op_row(result, "aten::mm")) == (1, 50, 50 - 5, 200, 200)
    kernel = kernel_row(result, NLL)
    assert (kernel.count, kernel.device_time_total, kernel.launched_by) == (1, 200, "aten::mm")
    assert [k.key for k in result.kernels if k.key != MEMCPY] == [NLL]


def test_self_time(load):
    # The plugin's test_self_time defines its checks in a nested function it never calls.
    # Its device figures hold; its self host figures (100 - 40 for aten::mat_mul, 40 for
    # aten::mm) leave out the runtime calls, which its own rule subtracts (test_all_categories:
    # 70 - 20 - 10 - 5), so they are checked here by that rule: 100 - 40 - 25 and 40 - 10.
    result = load(SELF_TIME)
    assert figures(op_row(result, "aten::mat_mul")) == (1, 100, 100 - 40 - 25, 20 + 16, 16)
    assert figures(op_row(result, "aten::mm")) == (1, 40, 40 - 10, 20, 20)


def test_pure_cpu(load):
    # Step i's "CpuOp" cost is its one op's self time; with no GPU work, its "Total" is
    # the step's length.
    result = load(PURE_CPU)
    assert result.timings == pytest.approx([200e-6, 100e-6])
    assert op_row(result, "aten::to").self_cpu_time_total == 10
    assert op_row(result, "aten::mm").self_cpu_time_total == 40


def test_gpu_utilization(load):
    # GPU 1 is busy (40 + 20) µs of the trace's 120 µs.
    result = load(GPU_UTILIZATION)
    assert result.timings == pytest.approx([120e-6])
    assert result.gpu_busy[0] / (result.timings[0] * 1e6) == pytest.approx((40 + 20) / 120)


# The plugin's expected memory figures: (self increase, increase, calls) in bytes. One
# difference on purpose: aten::to's calls are 4 in the plugin, 3 here, as kernelmagic
# leaves out what runs outside every ProfilerStep (the aten::to at 10-20 µs, before
# ProfilerStep#1, with no memory record in it).
GPU0_MEMORY = {"aten::to": (104, 104, 3), "aten::nll_loss_backward": (0, 0, 1),
               "aten::copy_": (0, 0, 1), "aten::addmm": (0, 0, 1),
               "aten::tranas_stride": (0, 0, 1), "aten::transpose": (0, 0, 1),
               "aten::t": (0, 0, 1), "aten::liner": (20, 20, 1)}
CPU_MEMORY = {"aten::to": (4, 4, 3), "aten::liner": (0, 50, 1),
              "aten::tranas_stride": (50, 50, 1), "aten::transpose": (0, 50, 1),
              "aten::t": (0, 50, 1)}


def test_memory_view(load):
    result = load(MEMORY_VIEW)
    for name, want in GPU0_MEMORY.items():
        row = op_row(result, name)
        assert (row.self_device_memory_usage, row.device_memory_usage, row.count) == want, name
    for name, want in CPU_MEMORY.items():
        row = op_row(result, name)
        assert (row.self_cpu_memory_usage, row.cpu_memory_usage, row.count) == want, name


@pytest.mark.parametrize(("events", "calls", "total"),
                         [(KERNEL_COLUMNS, 2 + 1 + 1, 15 + 10 + 13 + 17),
                          (KERNEL_COLUMNS_MISSING, 5, 1 + 2 + 3 + 4 + 5)],
                         ids=["complete", "missing_fields"])
def test_group_by_kernel_columns_per_kernel(load, events, calls, total):
    # The plugin groups by (name, op, grid, block, registers, shared memory); our kernels
    # view by name: its groups' calls and durations, summed.
    kernel = kernel_row(load(events), "kernel1")
    assert (kernel.count, kernel.device_time_total) == (calls, total)


def test_group_by_kernel_columns_op2(load):
    # op2's one launch is inside op2 on its own thread: both rules agree.
    assert op_row(load(KERNEL_COLUMNS), "op2").self_device_time_total == 17


@pytest.mark.xfail(strict=True, reason=(
    "differs on purpose: op1 runs on thread 123 while every launch attributed to it runs on "
    "thread 456 under no op; the plugin links them by External id, kernelmagic by the op "
    "around the runtime call (none here: the cudaLaunchKernel row owns that GPU work)"))
@pytest.mark.parametrize(("events", "device"), [(KERNEL_COLUMNS, 15 + 10 + 13),
                                                (KERNEL_COLUMNS_MISSING, 15)],
                         ids=["complete", "missing_fields"])
def test_group_by_kernel_columns_op1(load, events, device):
    result = load(events)
    assert kernel_row(result, "kernel1").launched_by == "op1"
    assert op_row(result, "op1").device_time_total == device


def test_tensor_core(load):
    # The plugin's tensor-core ratios: aten::conv2d's total device time is 15 + 10, all of
    # aten::cudnn_convolution's self device time (15) is the tensor-core kernel.
    result = load(TENSOR_CORE)
    assert operator_names(result, TENSOR_CORE) == \
        ["aten::conv2d", "aten::cudnn_convolution", "op_no_tc"]
    assert kernel_row(result, "kernel_no_tc").launched_by == "op_no_tc"
    assert kernel_row(result, VOLTA).launched_by == "aten::cudnn_convolution"
    assert op_row(result, "aten::conv2d").device_time_total == 15 + 10
    assert op_row(result, "aten::cudnn_convolution").self_device_time_total == 15
    assert op_row(result, "op_no_tc").self_device_time_total == 10


# --- both readers, every case, every form ------------------------------------------------

COLUMNS = ("kind", "name", "start", "end", "tid", "device", "correlation", "flops", "shapes",
           "nbytes")


@pytest.mark.parametrize("case", sorted(CASES))
def test_both_readers_and_every_form_give_one_table(tmp_path, case):
    tables = []
    for generation in GENERATIONS:
        for ids in IDS:
            folder = tmp_path / f"{generation}-{ids}"
            folder.mkdir()
            path = write(folder, translate(CASES[case], generation, ids))
            slow, fast = read_table(path, fast=False), trace_fast.read_table(path)
            assert fast is not None
            for column in COLUMNS:
                np.testing.assert_array_equal(getattr(fast, column), getattr(slow, column))
            assert fast.names == slow.names
            tables.append(slow)
    first = tables[0]
    for table in tables[1:]:
        for column in ("kind", "start", "end", "tid", "device", "correlation", "nbytes"):
            np.testing.assert_array_equal(getattr(table, column), getattr(first, column), column)
        assert [table.names[i] for i in table.name] == [first.names[i] for i in first.name]
