from dataclasses import fields

import pytest

from kernelmagic.core.options import (
    NSIGHT_EXCLUDES,
    OPTIONS,
    RECORDING,
    VIEWS,
    ProfileOptions,
    check_keywords,
    check_variable_name,
    trace_views,
)
from kernelmagic.core.sorting import SORT_KEYS


def test_defaults():
    o = ProfileOptions()
    assert (o.iters, o.warmup, o.topk, o.sort, o.cpu_only) == (10, 3, 10, None, False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"iters": 0}, "-n/--iters must be an integer >= 1; got 0"),
        ({"iters": 2.5}, "-n/--iters must be an integer >= 1; got 2.5"),
        ({"iters": True}, "-n/--iters must be an integer >= 1; got True"),
        ({"warmup": -1}, "-w/--warmup must be an integer >= 0; got -1"),
        ({"topk": 0}, "-k/--topk must be an integer >= 1; got 0"),
        ({"sort": "time"}, "-s/--sort must be one of self_device, self_cpu, device, cpu, "
                           "calls, avg, max_gain; got 'time'"),
        ({"name": "  "}, "--name must be a non-empty string"),
        ({"name": "a\nb"}, "--name must be a single line"),
    ],
)
def test_bad_values_name_the_option(kwargs, message):
    with pytest.raises(ValueError) as err:
        ProfileOptions(**kwargs)
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_warmup_zero_allowed():
    assert ProfileOptions(warmup=0).warmup == 0


def test_default_sort_follows_device():
    assert ProfileOptions().resolve_sort(profiles_device=True) == "self_device"
    assert ProfileOptions().resolve_sort(profiles_device=False) == "self_cpu"


@pytest.mark.parametrize("key", sorted(SORT_KEYS))
def test_every_sort_key_accepted_with_device(key):
    assert ProfileOptions(sort=key).resolve_sort(profiles_device=True) == key


@pytest.mark.parametrize("key", ["self_device", "device"])
def test_device_sort_refused_without_device(key):
    with pytest.raises(ValueError, match="needs device profiling, but CUDA is not available"):
        ProfileOptions(sort=key).resolve_sort(profiles_device=False)
    with pytest.raises(ValueError, match="--cpu-only was given"):
        ProfileOptions(sort=key, cpu_only=True).resolve_sort(profiles_device=False)


def test_variable_names():
    assert check_variable_name("-o/--out", "res") == "res"
    for bad in ("1x", "a-b", "class", ""):
        with pytest.raises(ValueError, match="-o/--out must be a Python identifier"):
            check_variable_name("-o/--out", bad)


# The option table: every list of options is derived from ProfileOptions' fields.

def test_every_field_is_an_option_and_the_magic_takes_each_one():
    from kernelmagic.magic import ProfileMagics

    # more_views: the options views declare themselves (tests/test_view_registry.py)
    names = [f.name for f in fields(ProfileOptions) if f.name != "more_views"]
    assert [o.name for o in OPTIONS] == names
    parser = ProfileMagics.profile.parser
    dests = {a.dest for a in parser._actions}
    assert set(names) <= dests
    # a value-taking option keeps ProfileOptions' default when the line omits it
    args = parser.parse_args(["--memory", "-n", "4"])
    assert (args.iters, args.warmup, args.memory) == (4, None, True)


def test_the_magic_builds_the_same_options_as_the_api():
    from kernelmagic.magic import ProfileMagics, options_from

    args = ProfileMagics.profile.parser.parse_args(
        ["-n", "4", "-w", "0", "--memory", "--memory-all", "--sort", "calls", "--timeline"])
    assert options_from(args, "cell[3]") == ProfileOptions(
        iters=4, warmup=0, memory=True, memory_all=True, sort="calls", timeline=True,
        name="cell[3]")  # -w 0 is a value given, not an option left out


def test_derived_lists_follow_the_declarations():
    assert VIEWS == ("memory", "shapes", "flops", "stack", "python", "modules", "timeline",
                     "steps")
    assert RECORDING == {"--memory": "profile_memory=True", "--shapes": "record_shapes=True",
                         "--flops": "with_flops=True", "--stack": "with_stack=True",
                         "--python": "with_stack=True", "--modules": "with_modules=True"}
    # --nsight runs no torch profiler: every view, --roofline/--counters (runs of their
    # own), --trace, --gather and --try (each variant is profiled) are excluded; the plain
    # run's settings are not
    assert set(NSIGHT_EXCLUDES.values()) == set(VIEWS) | {"roofline", "counters", "trace",
                                                         "gather", "variants"}


def test_takes_value_comes_from_the_table():
    from kernelmagic.magic import TAKES_VALUE

    assert TAKES_VALUE["-n"] and TAKES_VALUE["--trace"] and TAKES_VALUE["--compare"]
    assert not TAKES_VALUE["--memory"] and not TAKES_VALUE["-q"]


def test_a_trace_holds_the_views_its_table_has_data_for():
    from fakes import table_of

    from kernelmagic.core.events import Kind

    assert trace_views(table_of((Kind.OP, "aten::mm", 0, 10, 1))) == ["timeline"]
    held = table_of((Kind.OP, "aten::mm", 0, 10, 1, {"flops": 8}),
                    (Kind.MEMORY, "[memory]", 2, 2, 1),
                    (Kind.PYTHON, "cell.py(3): f", 0, 10, 1),
                    (Kind.RANGE, "module: ff.0 (Linear)", 0, 10, 1),
                    (Kind.RANGE, "cell[3]/step 0: x (2, 4) float32", 0, 10, 1))
    assert trace_views(held) == ["memory", "flops", "stack", "python", "modules",
                                     "timeline", "steps"]


def test_unknown_keywords_name_the_option():
    check_keywords({"memory": True, "iters": 3})
    with pytest.raises(ValueError, match="unknown option 'memroy'; expected one of iters"):
        check_keywords({"memroy": True})
