import pytest

from tuner.decide.stats import RepeatStats, bootstrap_ci, mad, repeat_stats, tied


def test_median_and_mad_on_known_data():
    s = repeat_stats([10.0, 12.0, 11.0, 30.0, 9.0])
    assert s.median == 11.0
    # |x - 11| = 1, 1, 0, 19, 2 -> median 1 -> scaled 1.4826
    assert s.mad == pytest.approx(1.4826)
    assert s.score == pytest.approx(11.0 - 1.4826 / 5 ** 0.5)  # minus the standard error
    assert mad([5.0, 5.0, 5.0]) == 0.0


def test_bootstrap_interval_contains_the_median_and_is_reproducible():
    values = [100.0, 102.0, 98.0, 101.0, 99.0, 103.0, 97.0]
    low, high = bootstrap_ci(values)
    assert low <= 100.0 <= high
    assert 97.0 <= low and high <= 103.0
    assert (low, high) == bootstrap_ci(values)
    assert bootstrap_ci([42.0]) == (42.0, 42.0)


def test_single_run_has_no_spread():
    s = repeat_stats([250.0])
    assert (s.n, s.median, s.mad, s.ci_low, s.ci_high, s.score) == (1, 250.0, 0.0, 250.0, 250.0, 250.0)


def test_tie_rule():
    a = RepeatStats(3, 100.0, 0.0, 100.0, 100.0)
    assert tied(a, RepeatStats(3, 100.9, 0.0, 0, 0), margin=0.01)
    assert not tied(a, RepeatStats(3, 102.0, 0.0, 0, 0), margin=0.01)
    # A spread as large as the gap makes it a tie; spreads add as root sum of squares.
    assert tied(a, RepeatStats(3, 105.0, 4.0, 0, 0), margin=0.01)
    assert tied(RepeatStats(3, 100.0, 3.0, 0, 0), RepeatStats(3, 105.0, 4.0, 0, 0), margin=0.0)
    assert not tied(RepeatStats(3, 100.0, 3.0, 0, 0), RepeatStats(3, 106.0, 4.0, 0, 0), margin=0.0)
    with pytest.raises(ValueError):
        repeat_stats([])


def test_shown_equal_needs_replays_and_a_tight_difference():
    from tuner.decide.stats import shown_equal

    steady = lambda median, n=4: RepeatStats(n=n, median=median, mad=0.5, ci_low=median, ci_high=median)
    assert shown_equal(steady(139.0), steady(140.0), 0.02)
    assert not shown_equal(steady(139.0, n=1), steady(140.0, n=1), 0.02)  # one replay shows nothing
    assert not shown_equal(steady(130.0), steady(140.0), 0.02)
    noisy = RepeatStats(n=4, median=140.0, mad=6.0, ci_low=130.0, ci_high=150.0)
    assert not shown_equal(steady(139.0), noisy, 0.02)
