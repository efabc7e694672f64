import pytest

from kernelmagic.core.timing import NOISY_BEST, NOISY_SPREAD, TimingStats
from kernelmagic.core.units import format_seconds, format_us


def test_stats_exact():
    s = TimingStats.of([0.004, 0.001, 0.002, 0.003, 0.005])
    assert s.n == 5
    assert s.median == pytest.approx(0.003)
    assert s.iqr == pytest.approx(0.002)  # q1=0.002, q3=0.004 (inclusive quartiles)
    assert s.best == 0.001 and s.worst == 0.005
    assert s.mean == pytest.approx(0.003)
    assert s.outlier_ratio == pytest.approx(0.005 / 0.0025)


def test_single_iteration_has_no_spread_and_no_warning():
    s = TimingStats.of([0.5])
    assert (s.median, s.iqr, s.stdev, s.outlier_ratio) == (0.5, 0.0, 0.0, None)
    assert s.warning() is None


def test_warning_when_slowest_is_far_slower_than_the_rest():
    steady = TimingStats.of([0.010, 0.011, 0.010, 0.012])
    assert steady.warning() is None
    spiky = TimingStats.of([0.010, 0.011, 0.010, 0.050])
    assert spiky.warning().startswith("The slowest iteration took 5.0x the median")


def test_the_one_rule_for_a_run_too_spread_to_trust():
    # Quartiles of 1, 2, 3, 4, 5 (inclusive): 2 and 4, median 3: IQR 2/3 of it.
    assert TimingStats.of([1, 2, 3, 4, 5]).noisy
    # The middle half spanning exactly NOISY_SPREAD of the median is not noisy; above is.
    steady = TimingStats.of([1.0, 1.0 - NOISY_SPREAD / 2, 1.0 + NOISY_SPREAD / 2])
    assert steady.relative_spread == pytest.approx(NOISY_SPREAD / 2)
    assert not steady.noisy
    # A best run under NOISY_BEST of the median (a quiet moment on a busy machine).
    quiet = TimingStats.of([NOISY_BEST * 0.9, 1.0, 1.0, 1.0, 1.0])
    assert quiet.best_share == pytest.approx(NOISY_BEST * 0.9) and quiet.noisy
    assert not TimingStats.of([1.0]).noisy  # no spread to judge


def test_empty_refused():
    with pytest.raises(ValueError):
        TimingStats.of([])


@pytest.mark.parametrize(
    ("us", "text"),
    [(0, "0 µs"), (0.25, "250 ns"), (1.234, "1.23 µs"), (12.34, "12.3 µs"), (812, "812 µs"),
     (1234, "1.23 ms"), (12345, "12.3 ms"), (1.5e6, "1.50 s")],
)
def test_format_us(us, text):
    assert format_us(us) == text


def test_format_seconds():
    assert format_seconds(0.0123) == "12.3 ms"
