import pytest

from kernelmagic.core.options import SORT_KEYS, ProfileOptions, check_variable_name


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
                           "calls, avg; got 'time'"),
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
