"""What an event is, from its category (Kineto's activity type) and its name: the rules
every source applies, in one place.

The live source (``kernelmagic/live/session.py``: a torch session's raw Kineto events,
whose ``activity_type()`` is the category a trace writes) and both trace readers
(``kernelmagic/sources/trace_columns.py``, used by ``trace_fast`` and ``trace_stream``)
turn each event into a ``Kind`` through these functions, so a profile and the trace it
exported give the same kinds (``tests/test_event_rules.py`` feeds the same events
through all three):

1. ``category_kind``: the category says the kind and whether the event is on the GPU
   timeline (``CATEGORIES``, with the older TensorBoard-era names); an unknown category
   is OTHER, never an op.
2. ``name_kind``: on the CPU, a few names override the category (``ProfilerStep#N`` is
   STEP; a DataLoader's ``enumerate(DataLoader)...`` is a user RANGE even where an older
   torch wrote it as an operator; an "op" named in brackets, ``[...]``, is a profiler
   record, OTHER).
3. ``MEMORY_NAME`` instants are allocations and frees (MEMORY).
"""

from __future__ import annotations

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
    "overhead": (Kind.OTHER, False),  # the profiler's own work ("Activity Buffer Request")
    "cpu_instant_event": (Kind.OTHER, False),  # instants; ``[memory]`` ones are MEMORY
    "kernel": (Kind.KERNEL, True),
    "gpu_memcpy": (Kind.MEMCPY, True),
    "gpu_memset": (Kind.MEMSET, True),
    "gpu_user_annotation": (Kind.GPU_RANGE, True),  # a range's copy on the GPU timeline
    "cuda_sync": (Kind.OTHER, True),  # a stream or event wait: on the GPU, not GPU work
    "operator": (Kind.OP, False),
    "python": (Kind.PYTHON, False),
    "runtime": (Kind.RUNTIME, False),
    "memcpy": (Kind.MEMCPY, True),
    "memset": (Kind.MEMSET, True),
}
#: What an unknown category is: OTHER, on the CPU (no rows, no device time).
UNKNOWN = (Kind.OTHER, False)
#: The CPU-side kinds whose names ``name_kind`` may override.
NAMED_KINDS = (Kind.OP, Kind.RANGE, Kind.OTHER)


def known_category(category: object) -> bool:
    """Whether ``category`` is one of ``CATEGORIES`` (any case)."""
    return type(category) is str and category.lower() in CATEGORIES


def category_kind(category: object) -> tuple[Kind, bool]:
    """(kind, whether on the GPU timeline) of a category; ``UNKNOWN`` for any other."""
    if type(category) is not str:
        return UNKNOWN
    return CATEGORIES.get(category.lower(), UNKNOWN)


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
