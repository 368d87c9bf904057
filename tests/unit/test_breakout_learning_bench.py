"""bench/breakout_learning.py: the SGD rate over minutes 20-80, interpolated between evaluations."""

import pytest

from bench.breakout_learning import print_table, sgd_rate


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


def row(side: str, cpu: str, rate_per_min: int) -> dict:
    evaluations = [{**mark, "return": 5.0} for mark in
                   marks((5.0, 0), (50.0, 45 * rate_per_min), (95.0, 90 * rate_per_min))]
    return {"side": side, "seed": 1, "cpu": cpu, "budget_s": 5400.0, "evaluations": evaluations,
            "agent_steps": 1, "train_steps": 1}


@pytest.mark.parametrize("peer_cpu, marked", [("CPU A, 2 cores", False), ("CPU B, 2 cores", True)])
def test_a_ratio_against_a_peer_row_of_another_cpu_is_marked(capsys, peer_cpu, marked):
    print_table([row("ours", "CPU A, 2 cores", 1200), row("sb3", peer_cpu, 600)])
    ours_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| ours"))
    assert ("2.00× †" in ours_line) is marked and "2.00×" in ours_line
