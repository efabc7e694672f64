"""What an event is, from its category (Kineto's activity type) and its name: the rules
every source applies, in one place.

The live source (``kernelmagic/live/session.py``: a torch session's raw Kineto events,
whose ``activity_type()`` is the category a trace writes) and both trace readers
(``kernelmagic/sources/trace_columns.py``, used by ``trace_fast`` and ``trace_stream``)
turn each event into a ``Kind`` through these functions, so a profile and the trace it
exported give the same kinds (``tests/test_event_rules.py`` feeds the same events
through all three):

1. ``category_kind``: the category says the kind and whether the event is on the GPU
   timeline (``CATEGORIES``, with the older TensorBoard-era names). Other accelerators'
   categories (Kineto's ``ActivityType`` names: MTIA's ``mtia_runtime`` calls and
   ``mtia_ccp_events`` device work, ``xpu_runtime``, ``privateuse1_runtime``, ``hpu_op``)
   are read the way CUDA's are: a runtime call on the CPU, device work on the device;
   ``BACKENDS`` says which backend a category names. An unknown category is OTHER, never
   an op: the sources count its events and time (``UNPLACED_KEY`` in the table's
   ``meta``), and the report says so in one line.
2. ``name_kind``: on the CPU, a few names override the category (``ProfilerStep#N`` is
   STEP; a DataLoader's ``enumerate(DataLoader)...`` is a user RANGE even where an older
   torch wrote it as an operator; an "op" named in brackets, ``[...]``, is a profiler
   record, OTHER).
3. ``MEMORY_NAME`` instants are allocations and frees (MEMORY).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernelmagic.core.events import Kind
from kernelmagic.core.op_names import DATA_LOADER

#: An allocation (+bytes) or free (-bytes), recorded with ``profile_memory=True``.
MEMORY_NAME = "[memory]"
#: The ranges ``torch.profiler.profile.step()`` opens: one per training step.
STEP_PREFIX = "ProfilerStep#"

#: Category (lower case) -> (kind, whether on the GPU timeline). torch >= 1.13 names,
#: then the older ones (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``).
CATEGORIES: dict[str, tuple[Kind, bool]] = {
    "cpu_op": (Kind.OP, False),
    "user_annotation": (Kind.RANGE, False),
    "python_function": (Kind.PYTHON, False),
    "cuda_runtime": (Kind.RUNTIME, False),
    "cuda_driver": (Kind.RUNTIME, False),
    "privateuse1_runtime": (Kind.RUNTIME, False),
    "privateuse1_driver": (Kind.RUNTIME, False),
    "xpu_runtime": (Kind.RUNTIME, False),
    "xpu_driver": (Kind.RUNTIME, False),
    "mtia_runtime": (Kind.RUNTIME, False),
    "hpu_op": (Kind.RUNTIME, False),  # Habana's host-side runtime events
    "glow_runtime": (Kind.RUNTIME, False),
    "overhead": (Kind.OTHER, False),  # the profiler's own work ("Activity Buffer Request")
    "cpu_instant_event": (Kind.OTHER, False),  # instants; ``[memory]`` ones are MEMORY
    "kernel": (Kind.KERNEL, True),
    "gpu_memcpy": (Kind.MEMCPY, True),
    "gpu_memset": (Kind.MEMSET, True),
    "gpu_user_annotation": (Kind.GPU_RANGE, True),  # a range's copy on the GPU timeline
    "mtia_ccp_events": (Kind.KERNEL, True),  # MTIA's work on the device (its "kernels")
    "cuda_sync": (Kind.OTHER, True),  # a stream or event wait: on the GPU, not GPU work
    "xpu_sync": (Kind.OTHER, True),
    "cuda_event": (Kind.OTHER, True),  # an event recorded on a stream: an instant, not work
    "trace": (Kind.OTHER, False),  # Kineto's span of the session ("PyTorch Profiler (0)")
    "cuda_profiler_range": (Kind.OTHER, False),  # metric values per kernel (counter_ranges)
    "operator": (Kind.OP, False),
    "python": (Kind.PYTHON, False),
    "runtime": (Kind.RUNTIME, False),
    "memcpy": (Kind.MEMCPY, True),
    "memset": (Kind.MEMSET, True),
}
#: What an unknown category is: OTHER, on the CPU (no rows, no device time).
UNKNOWN = (Kind.OTHER, False)
#: Category (lower case) -> the backend it names, for devices that are neither CUDA nor
#: ROCm (whose traces share CUDA's categories: ``io/traces.py: gpu_runtime`` tells them
#: apart by the runtime calls' names).
BACKENDS: dict[str, str] = {
    "mtia_runtime": "mtia", "mtia_ccp_events": "mtia", "mtia_insight": "mtia",
    "mtia_counters": "mtia", "xpu_runtime": "xpu", "xpu_driver": "xpu", "xpu_sync": "xpu",
    "privateuse1_runtime": "privateuse1", "privateuse1_driver": "privateuse1",
    "hpu_op": "hpu",
}
#: The backend (``gpu_runtime`` of a result) -> how a report names it, and the word for
#: its device where a report would say "GPU".
BACKEND_LABELS: dict[str, tuple[str, str]] = {
    "": ("CUDA", "GPU"), "cuda": ("CUDA", "GPU"), "rocm": ("ROCm", "GPU"),
    "mtia": ("MTIA", "MTIA"), "xpu": ("XPU", "XPU"), "hpu": ("HPU", "HPU"),
    "privateuse1": ("PrivateUse1", "device"),
}
#: The table's ``meta`` keys the sources fill: the backend its categories name, and the
#: categories no rule places, ``{category: [events, ns]}`` (complete events only).
BACKEND_KEY = "device_backend"  # (``backend`` is distributedInfo's: "nccl")
UNPLACED_KEY = "unplaced"
#: How an event without a category is named in that count.
NO_CATEGORY = "(no category)"
#: How duration events ("ph" "B" or "E") without their pair are named in that count (no
#: time: a begin that never ends, an end that closes nothing).
UNPAIRED = "(B or E without its pair)"
#: The CPU-side kinds whose names ``name_kind`` may override.
NAMED_KINDS = (Kind.OP, Kind.RANGE, Kind.OTHER)


def known_category(category: object) -> bool:
    """Whether ``category`` is one of ``CATEGORIES`` (any case)."""
    return type(category) is str and category.lower() in CATEGORIES


def categories_meta(categories: Iterable[object],
                    unplaced: Iterable[tuple[object, int, int]]) -> dict[str, Any]:
    """The table's ``meta`` entries the categories a source read give it: the backend they
    name (``BACKEND_KEY``) and, from ``unplaced`` (category, events, ns) of the categories
    no rule knows, their events and time (``UNPLACED_KEY``: ``{category: [events, ns]}``,
    those with time only)."""
    meta: dict[str, Any] = {}
    backend = next((BACKENDS[c.lower()] for c in categories
                    if type(c) is str and c.lower() in BACKENDS), "")  # the first named
    if backend:
        meta[BACKEND_KEY] = backend
    counts: dict[str, list[int]] = {}
    for category, events, ns in unplaced:
        if ns > 0:
            label = category if type(category) is str else NO_CATEGORY
            tally = counts.setdefault(label, [0, 0])
            tally[0] += events
            tally[1] += ns
    if counts:
        meta[UNPLACED_KEY] = counts
    return meta


def category_kind(category: object) -> tuple[Kind, bool]:
    """(kind, whether on the GPU timeline) of a category; ``UNKNOWN`` for any other."""
    return CATEGORIES.get(category.lower(), UNKNOWN) if type(category) is str else UNKNOWN


def name_kind(name: str, kind: Kind) -> Kind:
    """The kind of a CPU-side event called ``name`` whose category said ``kind``."""
    if kind not in NAMED_KINDS:
        return kind
    if name.startswith(STEP_PREFIX):
        return Kind.STEP
    if name.startswith(DATA_LOADER):
        return Kind.RANGE
    if kind == Kind.OP and name.startswith("[") and name.endswith("]"):
        return Kind.OTHER
    return kind


def kinds_by_name(name: str) -> tuple[Kind, ...]:
    """``name_kind(name, k)`` for every ``k``, indexed by ``k``: what a reader caches per
    distinct name so its per-event step is one lookup."""
    return tuple(name_kind(name, k) for k in Kind)
