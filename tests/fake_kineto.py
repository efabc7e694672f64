"""Stand-ins for torch's raw Kineto results, to feed both torch's parse and ours.

``FakeEvent`` answers every method ``torch.autograd.profiler.profile._parse_kineto_results``
and ``kernelmagic/live/session.py`` call, so a CUDA session can be described by hand on a
machine without a GPU and torch's own ``key_averages()`` computed from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
ORIGIN = 1_000_000_000


@dataclass
class FakeEvent:
    name_: str
    start: int  # µs from the trace start
    end: int
    tid: int = 1
    activity: str = "cpu_op"
    device: Any = CPU
    corr: int = 0
    linked: int = 0
    user: bool = False
    bytes_: int = 0
    stream: int = 0
    shape_list: list = field(default_factory=list)

    def name(self): return self.name_
    def device_type(self): return self.device
    def activity_type(self): return self.activity
    def start_ns(self): return ORIGIN + self.start * 1000
    def end_ns(self): return ORIGIN + self.end * 1000
    def duration_ns(self): return (self.end - self.start) * 1000
    def start_thread_id(self): return self.tid
    def end_thread_id(self): return self.tid
    def fwd_thread_id(self): return self.tid
    def correlation_id(self): return self.corr
    def linked_correlation_id(self): return self.linked
    def is_async(self): return False
    def is_hidden_event(self): return False
    def is_user_annotation(self): return self.user
    def is_python_function(self): return self.activity == "python_function"
    def shapes(self): return self.shape_list
    def flops(self): return 0
    def nbytes(self): return self.bytes_
    def device_index(self): return 0
    def device_resource_id(self): return self.stream
    def sequence_nr(self): return -1
    def overload_name(self): return ""
    def concrete_inputs(self): return []
    def kwinputs(self): return {}
    def stack(self): return []
    def scope(self): return 0
    def cuda_elapsed_us(self): return -1
    def privateuse1_elapsed_us(self): return -1
    def metadata_json(self): return ""
    def extra_meta(self): return {}
    def typed_metadata(self): return {}  # torch 2.14 reads it
    def flow_id(self): return 0
    def flow_type(self): return 0
    def flow_start(self): return False
    def external_id(self): return 0
    def structured_input_shapes(self): return []
    def structured_input_strides(self): return []
    def dtypes(self): return []
    def python_id(self): return -1
    def python_parent_id(self): return -1
    def python_module_id(self): return -1


class FakeResults:
    def __init__(self, events: list[FakeEvent]) -> None:
        self._events = events

    def events(self) -> list[FakeEvent]:
        return list(self._events)

    def trace_start_ns(self) -> int:
        return ORIGIN


def session(events: list[FakeEvent]) -> SimpleNamespace:
    """What kernelmagic reads of a finished session: ``kineto_results``."""
    return SimpleNamespace(kineto_results=FakeResults(events))


def torch_function_events(events: list[FakeEvent]) -> Any:
    """torch's own parse of the fake results, tree built, as ``prof.function_events``."""
    from torch.autograd.profiler import profile
    from torch.autograd.profiler_util import EventList

    parsed = profile._parse_kineto_results(SimpleNamespace(use_device="cuda"),
                                           FakeResults(events))
    found = EventList(parsed, use_device="cuda", profile_memory=True)
    found._build_tree()
    return found


def torch_profile(events: list[FakeEvent]) -> Any:
    """A finished torch profile of the fake results, as tests compare against it:
    ``.function_events`` and ``.key_averages()`` from torch's own parse."""
    found = torch_function_events(events)
    return SimpleNamespace(function_events=found,
                           key_averages=lambda group_by_input_shape=False:
                           found.key_averages(group_by_input_shape))

