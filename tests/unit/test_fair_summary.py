"""The peers' page (docs/peers.md) and the verdict it and every sitting's tables use (bench/fair_summary.py)."""

from __future__ import annotations

from pathlib import Path

from bench import fair_summary
from bench.fair_tables import compare


def test_the_page_is_what_the_committed_raw_rows_give():
    # A headline added, a sitting re-run or a hand edit of the page without regenerating it fails here.
    page = Path(fair_summary.PAGE).read_text(encoding="utf-8")
    assert page == fair_summary.page(), "docs/peers.md is stale: run python bench/fair_summary.py"


def test_every_headline_directory_has_a_readme_and_rows_of_ours_and_a_peer():
    for headline in fair_summary.HEADLINES:
        directory = Path(fair_summary.RESULTS) / headline.folder
        assert (directory / "README.md").is_file(), headline.folder
        assert headline.stands in ("designed on", "held out"), headline
        rows = fair_summary.headline_rows(headline)
        assert rows and all(f"| {headline.env_id} |" in row for row in rows), headline


def test_the_verdict_is_a_ratio_above_random_play_and_a_difference_where_a_ratio_says_nothing():
    ahead = compare([10.0, 11.0, 12.0, 10.5, 11.5], [5.0, 5.5, 6.0, 5.2, 5.8], random_score=0.0)
    assert (ahead["kind"], ahead["verdict"]) == ("ratio", "ahead") and 1.8 < ahead["point"] < 2.2, ahead
    level = compare([5.0, 9.0, 4.0, 8.0, 6.0], [6.0, 5.0, 8.0, 7.0, 4.0], random_score=0.0)
    assert (level["kind"], level["verdict"]) == ("ratio", "level"), level
    behind = compare([1.0, 1.2, 0.9, 1.1, 1.0], [3.0, 3.2, 2.9, 3.1, 3.0], random_score=0.0)
    assert behind["verdict"] == "behind", behind
    # The peer at random play's level: no ratio, the difference of the means decides.
    at_random = compare([0.5, 0.6, 0.4, 0.5, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0], random_score=0.0)
    assert (at_random["kind"], at_random["verdict"]) == ("difference", "ahead"), at_random
    # Ours below random play and the peer above it: a negative ratio reads as nothing; the difference does.
    below = compare([-0.1, -0.1, -0.1, -0.1, -0.1], [0.4, 0.5, 0.3, 0.6, 0.5], random_score=0.0)
    assert (below["kind"], below["why"], below["verdict"]) == ("difference", "ours", "behind"), below
    assert compare([1.0], [0.5], random_score=0.0)["verdict"] is None
