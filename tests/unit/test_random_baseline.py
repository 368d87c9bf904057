"""Random play's score and the kept policy's comparison with it (evaluator/random_baseline.py)."""

from __future__ import annotations

import json

import pytest

from dqn.resolve import resolved_builder
from dqn.settings.config import EvaluatorConfig
from evaluator.evaluate import make_episodes
from evaluator.random_baseline import (
    RANDOM_PLAY_FILE,
    kept_below_random_play,
    measure_random_play,
    read_random_play,
    save_random_play,
)


def test_random_play_scores_cartpole_as_random_actions_do_and_repeats_for_a_seed():
    config = EvaluatorConfig(env_id="CartPole-v1", fc_layer_params=(8,), observation_history=1,
                             image_encoding="scaled", samples_per_insert=4.0)
    builder = resolved_builder(config)
    episodes = make_episodes(builder.config, builder, 30)
    first = measure_random_play(episodes, seed=1, stop_requested=lambda: False)
    again = measure_random_play(episodes, seed=1, stop_requested=lambda: False)
    other = measure_random_play(episodes, seed=2, stop_requested=lambda: False)
    episodes.close()
    # Uniformly random CartPole actions last about 22 steps; a greedy policy of any fixed weights about 9 or far more.
    assert 15 < first["average_return"] < 32 and first["episodes"] == 30, first
    assert again["average_return"] == first["average_return"] and other["seed"] != first["seed"]
    assert measure_random_play(episodes, seed=1, stop_requested=lambda: True) is None  # a stop keeps no record


def write(directory, name: str, record) -> None:
    (directory / name).write_text(json.dumps(record))


@pytest.mark.parametrize("kept, below", [
    ({"train_step": 500, "average_return": 3.0, "confirmed_return": None}, True),
    ({"train_step": 500, "average_return": 3.0, "confirmed_return": 12.0}, False),  # the re-check is the score
    ({"train_step": 500, "average_return": 30.0, "confirmed_return": 4.0}, True),
    ({"train_step": 500, "average_return": 10.0, "confirmed_return": None}, False),  # level is not below
])
def test_the_kept_policy_below_random_play_is_named_by_its_score(tmp_path, kept, below):
    save_random_play(str(tmp_path), {"average_return": 10.0, "episodes": 30, "seed": 7, "seconds": 0.1})
    write(tmp_path, "best_policy.json", kept)
    line = kept_below_random_play(str(tmp_path))
    assert (line is not None) == below, line
    if below:
        assert line.startswith("the kept policy (train step 500) scores ") and "random play's 10.0 over 30" in line


def test_a_small_gap_below_random_play_shows_in_the_line(tmp_path):
    # A sparse-reward env: random play finds the reward now and then (0.03), the kept policy never (0.0).
    save_random_play(str(tmp_path), {"average_return": 0.03, "episodes": 30, "seed": 7, "seconds": 0.1})
    write(tmp_path, "best_policy.json", {"train_step": 9, "average_return": 0.0, "confirmed_return": None})
    line = kept_below_random_play(str(tmp_path))
    assert "scores 0 on" in line and "random play's 0.03 over 30" in line, line


def test_without_both_records_there_is_no_comparison(tmp_path):
    assert read_random_play(str(tmp_path)) is None and kept_below_random_play(str(tmp_path)) is None
    write(tmp_path, "best_policy.json", {"train_step": 5, "average_return": -5.0, "confirmed_return": None})
    assert kept_below_random_play(str(tmp_path)) is None  # no random play measured (yet)
    (tmp_path / RANDOM_PLAY_FILE).write_text('{"average_return": 1')  # torn
    assert read_random_play(str(tmp_path)) is None and kept_below_random_play(str(tmp_path)) is None
