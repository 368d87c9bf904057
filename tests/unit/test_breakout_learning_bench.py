"""bench/breakout_learning.py: the SGD rate over minutes 20-80, interpolated between evaluations."""

import pytest

from bench.breakout_learning import sgd_rate


def marks(*pairs: tuple[float, int]) -> list[dict]:
    return [{"minutes": minutes, "train_step": step} for minutes, step in pairs]


def test_the_rate_is_interpolated_over_minutes_20_to_80():
    # 30 steps/s throughout: 1,800 a minute, so 36,000 at minute 20 and 144,000 at minute 80.
    evaluations = marks((5.0, 9_000), (25.0, 45_000), (70.0, 126_000), (90.0, 162_000))
    assert sgd_rate(evaluations) == pytest.approx(30.0, rel=1e-3)


def test_a_run_that_trained_out_early_is_measured_to_its_last_evaluation():
    evaluations = marks((5.0, 0), (20.0, 60_000), (60.0, 180_000))  # 50/s from minute 20, stopped at 60
    assert sgd_rate(evaluations) == pytest.approx(50.0, rel=1e-3)


def test_no_rate_without_enough_of_the_window():
    assert sgd_rate(marks((25.0, 10_000), (90.0, 100_000))) is None  # nothing before minute 20
    assert sgd_rate(marks((5.0, 0), (45.0, 60_000))) is None  # stopped within 30 minutes of minute 20
    assert sgd_rate([]) is None
