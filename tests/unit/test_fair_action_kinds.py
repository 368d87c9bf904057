"""The fair harness's action kinds on envs CI has: illegal actions counted, random play, sides, flat numbering.

Connect Four (pettingzoo) and the MultiDiscrete lander (Box2D) need bench extras CI does not install; their
envs go through the same wrappers, checked here on Taxi-v4 and Pendulum-v1.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from bench import fair_eval, fair_run
from bench.action_kinds import CountIllegal, FlatActions, GridActions, legal_actions
from bench.fair_sides import OURS_FLAGS, PLAIN_PICKS, RANDOM_DRAWS, SIDES, env_kind, misfit, own_flags, side_order
from dqn.envs.action_spaces import ActionForm
from dqn.settings.common import AUTO_FROM_ENV
from dqn.settings.config import LocalConfig
from dqn.settings.loading import resolve


def test_an_action_the_taxi_mask_forbids_is_counted_and_a_valid_one_is_not():
    env = CountIllegal(gym.make("Taxi-v4"))
    env.reset(seed=1)
    legal = legal_actions(env)
    assert legal.dtype == bool and legal.any() and not legal.all(), legal
    before = CountIllegal.illegal_total
    env.step(int(np.flatnonzero(legal)[0]))
    assert CountIllegal.illegal_total == before
    env.reset(seed=1)
    env.step(int(np.flatnonzero(~legal)[0]))  # into a wall: Taxi allows it
    assert CountIllegal.illegal_total == before + 1


def test_random_play_on_taxi_takes_only_valid_actions_and_cartpole_reports_no_mask(tmp_path):
    out = tmp_path / "scores.jsonl"
    for env_id in ("Taxi-v4", "CartPole-v1"):
        fair_eval.main(["--side", "random", "--env-id", env_id, "--episodes", "2", "--out", str(out)])
    taxi, cartpole = (json.loads(line) for line in out.read_text().splitlines())
    assert taxi["illegal_actions"] == [0, 0] and len(taxi["returns"]) == 2 and taxi["episode_cap"] == 200, taxi
    assert cartpole["illegal_actions"] is None and len(cartpole["returns"]) == 2, cartpole


def test_each_env_kind_gets_its_sides_and_ours_takes_every_place_in_turn():
    assert env_kind("Taxi-v4") == "masked" and env_kind("CartPole-v1") == "plain"
    assert misfit("ours-unmasked", "plain") and misfit("maskable-ppo", "masked") is None
    assert misfit("sb3-dqn-flat", "masked") and misfit("ours", "multi-discrete") is None
    assert misfit("ours-plain", "multi-discrete") is None and misfit("ours-plain", "masked") is None
    classic = [side_order(["ours", "sb3", "sb3-scaled"], position) for position in range(3)]
    assert classic == [["ours", "sb3", "sb3-scaled"], ["sb3", "ours", "sb3-scaled"], ["sb3", "sb3-scaled", "ours"]]


def test_the_flat_peer_numbers_combinations_as_the_service_does():
    env = FlatActions(GridActions(gym.make("Pendulum-v1"), ((-2.0, 0.0, 2.0), (0.0, 1.0))))
    assert env.action_space == gym.spaces.Discrete(6)
    form = ActionForm.of(env.env.action_space)
    assert form.layout == "flat"
    for index in range(6):
        assert np.array_equal(env.action(index), form.env_action(index)), index
    assert env.env.action(env.action(5)).tolist() == [2.0, 1.0]  # the last combination: each dimension's last level


class GuessTheOpponent(gym.Env):
    """Pays 1 when the action equals the opponent's move, drawn from the env's own generator at each step."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(7)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._steps = 0
        return 0, {}

    def step(self, action):
        self._steps += 1
        reward = float(int(action) == int(self.np_random.choice(7)))
        return 0, reward, False, self._steps >= 20, {}


def test_random_play_draws_apart_from_the_env_generator_an_opponent_may_use(tmp_path):
    # With the episode's seed alone, the player's draws were the opponent's: every guess right, random play "perfect".
    gym.register("tests.GuessTheOpponent-v0", entry_point=GuessTheOpponent, max_episode_steps=20)
    out = tmp_path / "scores.jsonl"
    fair_eval.main(["--side", "random", "--env-id", "tests.GuessTheOpponent-v0", "--episodes", "30", "--out", str(out)])
    row = json.loads(out.read_text())
    assert row["draws"] == RANDOM_DRAWS
    assert 20 / 7 * 0.5 < np.mean(row["returns"]) < 20 / 7 * 1.5, row["returns"]  # 1 in 7 of 20 steps


def test_tables_use_random_play_drawn_apart_where_a_sitting_has_it():
    from bench.fair_tables import random_play

    rows = [{"side": "random", "env_id": "A", "returns": [1.0, 1.0]},
            {"side": "random", "env_id": "A", "returns": [0.0, -0.2], "draws": RANDOM_DRAWS},
            {"side": "random", "env_id": "B", "returns": [3.0]}]
    assert random_play(rows) == {"A": -0.1, "B": 3.0}


def test_the_plain_side_holds_every_auto_learning_rule_at_its_plain_pick_and_leaves_only_the_mask_to_the_env():
    flags = OURS_FLAGS["ours-plain"]
    parsed = resolve(LocalConfig, environ={}, flags={flag[2:].replace("-", "_"): value
                                                     for flag, value in zip(flags[::2], flags[1::2], strict=True)})
    assert parsed.unresolved() == ["action_mask"], "a new auto rule needs its plain pick in PLAIN_PICKS"
    assert {name: getattr(parsed, name) for name in PLAIN_PICKS} == PLAIN_PICKS
    assert set(PLAIN_PICKS) == set(AUTO_FROM_ENV) - {"action_mask"}


def test_the_candidate_side_runs_the_sittings_flags_on_any_env_and_needs_them(tmp_path, capsys):
    candidate = ["--samples-per-insert", "16"]
    assert own_flags("ours-candidate", candidate) == candidate and own_flags("ours", candidate) == []
    assert misfit("ours-candidate", "masked") is None and misfit("ours-candidate", "plain") is None
    for argv in (["--sides", "ours", "ours-candidate"], ["--sides", "ours", "--candidate-flags", "--gamma 0.9"]):
        with pytest.raises(SystemExit) as stop:
            fair_run.main(["--envs", "CartPole-v1", "--out", str(tmp_path), *argv])
        assert stop.value.code == 2
        assert "--candidate-flags and the side ours-candidate go together" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before the sitting's first row


def test_every_side_has_its_own_colour_in_the_plots():
    from bench.fair_tables import SIDE_COLORS

    assert list(SIDE_COLORS) == list(SIDES) and len(set(SIDE_COLORS.values())) == len(SIDES)


@pytest.mark.parametrize("env_id, choose", [
    ("Taxi-v4", lambda observation: int(observation) % 6),  # a mask in info, and a policy that ignores it
    ("CartPole-v1", lambda observation: int(observation[2] > 0)),  # episodes that end at different steps
])
def test_episodes_played_side_by_side_are_those_played_one_after_another(env_id, choose):
    seeds, cap = fair_eval.eval_seeds(6), 60
    one_by_one = []
    for seed in seeds:
        env = CountIllegal(gym.make(env_id))
        observation, _ = env.reset(seed=seed)
        total, steps, done = 0.0, 0, False
        while not done and steps < cap:
            observation, reward, terminated, truncated, _ = env.step(choose(observation))
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        one_by_one.append((total, env.illegal))
    returns, illegal = fair_eval.play(lambda: CountIllegal(gym.make(env_id)),
                                      lambda _envs, observations, _indices: [choose(o) for o in observations], seeds,
                                      cap)
    assert len({total for total, _ in one_by_one}) > 1, one_by_one  # the episodes differ
    if env_id == "Taxi-v4":
        assert list(zip(returns, illegal, strict=True)) == one_by_one and any(illegal), illegal
    else:
        assert returns == [total for total, _ in one_by_one] and illegal is None
        assert min(returns) < cap, returns  # some episodes end before others
