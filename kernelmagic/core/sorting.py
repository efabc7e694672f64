"""Sort keys, and which self time is primary, in one place (imports nothing heavy).

A profile is read through one self time: the device's when device (CUDA) activity was
profiled, the CPU's otherwise. Shares, the summary's total, comparisons, the ranks' op
times and the findings all take it from ``self_time_field``/``self_time``, and the
default ``--sort`` key follows it (``default_sort``). Each ``--sort`` key is one
``SortKey`` in ``SORTS``: what it orders by, the chart's words for it, and the op
table's column that shows it, so the option's help, the result's ordering, the chart
and the table cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The row fields of the two self times (``OpRow``: µs summed over the iterations).
SELF_DEVICE_FIELD = "self_device_time_total"
SELF_CPU_FIELD = "self_cpu_time_total"


def self_time_field(on_device: bool) -> str:
    """The row field of the primary self time: device time where the device is profiled."""
    return SELF_DEVICE_FIELD if on_device else SELF_CPU_FIELD


def self_time(row: Any, on_device: bool) -> float:
    """``row``'s primary self time (µs, summed over the iterations)."""
    return float(getattr(row, self_time_field(on_device)))


def self_time_label(on_device: bool) -> str:
    """How headings name the primary self time: ``self device`` or ``self CPU``."""
    return "self device" if on_device else "self CPU"


@dataclass(frozen=True)
class SortKey:
    """One ``--sort`` key.

    ``field`` is the row field it orders by; ``avg`` has none of its own (``None``): it
    orders by time per call on the primary device. ``measure`` is what the chart's title
    says the bars measure; ``device`` says the key needs device profiling.
    """

    name: str
    meaning: str
    measure: str
    field: str | None
    device: bool = False

    @property
    def is_self_time(self) -> bool:
        """Whether the key orders by a self time (so bars are shares of the total)."""
        return self.field in (SELF_DEVICE_FIELD, SELF_CPU_FIELD)


SORTS: tuple[SortKey, ...] = (
    SortKey("self_device", "self device time (time in the op's own kernels)",
            "self device time per iteration", SELF_DEVICE_FIELD, device=True),
    SortKey("self_cpu", "self CPU time (time in the op itself, children excluded)",
            "self CPU time per iteration", SELF_CPU_FIELD),
    SortKey("device", "total device time (the op and everything it calls)",
            "total device time per iteration (nested ops overlap)", "device_time_total",
            device=True),
    SortKey("cpu", "total CPU time (the op and everything it calls)",
            "total CPU time per iteration (nested ops overlap)", "cpu_time_total"),
    SortKey("calls", "number of calls", "calls per iteration", "count"),
    SortKey("avg", "total time per call", "time per call", None),
    SortKey("max_gain", "what the median iteration would save without the row (the dependency "
            "model)", "what the median iteration would save without it", "max_gain_us"),
)
_BY_NAME = {key.name: key for key in SORTS}

#: Sort keys accepted by ``--sort``, with what each one orders by.
SORT_KEYS: dict[str, str] = {key.name: key.meaning for key in SORTS}


def sort_key(name: str) -> SortKey:
    """The ``SortKey`` called ``name``; ValueError naming the accepted keys otherwise."""
    found = _BY_NAME.get(name)
    if found is None:
        raise ValueError(f"unknown sort key {name!r}; expected one of {', '.join(SORT_KEYS)}")
    return found


def default_sort(profiles_device: bool) -> str:
    """The sort key when none is given: the primary self time."""
    return "self_device" if profiles_device else "self_cpu"


def sort_help() -> str:
    """The ``--sort`` option's help: every key, in ``SORTS``' order, the defaults named."""
    defaults = {default_sort(True): " (default when CUDA is profiled)",
                default_sort(False): " (default otherwise)"}
    return "sort key: " + ", ".join(key + defaults.get(key, "") for key in SORT_KEYS)


def resolve_sort(sort: str | None, profiles_device: bool, cpu_only: bool = False) -> str:
    """The sort key a run uses: ``sort``, else ``default_sort``. ValueError when ``sort``
    needs device times that are not profiled (``cpu_only``: why, for the message)."""
    if sort is None:
        return default_sort(profiles_device)
    if sort_key(sort).device and not profiles_device:
        reason = "--cpu-only was given" if cpu_only else "CUDA is not available"
        raise ValueError(f"-s/--sort {sort} needs device profiling, but {reason}; "
                         "use self_cpu, cpu, calls or avg")
    return sort


def usable_sort_key(name: str, profiles_device: bool) -> SortKey:
    """``sort_key(name)``; ValueError also when the key needs device times a result
    without device profiling lacks (``top(by=...)``, ``table(by=...)``)."""
    key = sort_key(name)
    if key.device and not profiles_device:
        usable = ", ".join(k.name for k in SORTS if not k.device)
        raise ValueError(f"sort key {name!r} needs device times, and this result has none "
                         f"(no device was profiled); use one of {usable}")
    return key


def sort_value(name: str, profiles_device: bool) -> Callable[[Any], float]:
    """A function from an op row to the figure sort key ``name`` orders it by."""
    # avg has no field: time per call on the primary device
    attr = (usable_sort_key(name, profiles_device).field
            or ("device_time" if profiles_device else "cpu_time"))
    return lambda row: float(getattr(row, attr))


def sort_column(name: str, profiles_device: bool) -> str:
    """The op table's column id that shows sort key ``name``."""
    if usable_sort_key(name, profiles_device).field is None:
        return "device_avg" if profiles_device else "cpu_avg"
    return name
