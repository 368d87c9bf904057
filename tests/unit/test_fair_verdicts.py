"""The fair tables' verdicts: a ratio with its interval, and the difference where a side is at random play's level."""

from __future__ import annotations

from bench.fair_tables import ratio_lines


def row(ours: list[float], peer: list[float], random_score: float = 0.0) -> list[str]:
    """The cells of the one ratio row: env, peer, metric, seeds, ratio, interval, verdict."""
    line, = ratio_lines("E", {"final": {"ours": ours, "sb3": peer}, "area": {}}, random_score)
    return [cell.strip() for cell in line.strip("| ").split(" | ")]


def verdict(ours: list[float], peer: list[float], random_score: float = 0.0) -> str:
    return row(ours, peer, random_score)[-1]


def test_ratios_name_the_side_ahead_only_when_the_interval_leaves_1():
    assert verdict([10, 11, 12, 10, 11], [5, 5.5, 6, 5, 5.5]) == "ours ahead"
    assert verdict([5, 5.5, 6, 5, 5.5], [10, 11, 12, 10, 11]) == "sb3 ahead"
    assert verdict([5, 9, 6, 11, 7], [6, 8, 7, 10, 6]) == "level"


def test_a_side_at_random_plays_level_is_judged_by_the_difference_of_means():
    # Random play scores 1; the peer ends at or below it in every seed, so a ratio over it says nothing.
    ahead = verdict([4, 5, 6, 5, 4], [1, 0.5, 1, 1, 0.8], random_score=1)
    assert ahead.startswith("ratio undefined (sb3 not above random play") and ahead.endswith(": ours ahead"), ahead
    # Ours below random play on average: a ratio would be negative, so the difference says it.
    below = verdict([1, 1, 0.9, 1, 1], [3, 4, 5, 3, 4], random_score=1)
    assert below.startswith("ratio undefined (ours not above random play on average)"), below
    assert below.endswith(": sb3 ahead"), below
    assert row([4, 5, 6, 5, 4], [1, 0.5, 1, 1, 0.8], random_score=1)[4:6] == ["-", "[-, -]"]  # no ratio shown
    # The peer clearly ahead while ours stays at random play's level: the difference says so.
    assert verdict([1, 1.2, 1, 1.1, 1], [1] * 5, random_score=1).endswith(": level")
    assert verdict([0, 0.2, 0, 0.1, 0], [1] * 5, random_score=1).endswith(": sb3 ahead")
    assert verdict([1, 1, 1, 1, 1], [1, 1, 1, 1, 1], random_score=1).endswith("difference ours - sb3 0.00 [0.00, "
                                                                              "0.00]: level")
