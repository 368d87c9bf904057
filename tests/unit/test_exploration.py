"""Held random actions (temporally extended epsilon-greedy): hold lengths, the share of random steps, epsilon 0."""

import numpy as np
import pytest

from dqn.exploration import MAX_HOLD_STEPS, HeldRandomActions, mean_hold_steps

GREEDY = -1  # outside the action range, so a test can tell greedy steps from random ones


def play(explorer: HeldRandomActions, epsilon: float, steps: int, num_envs: int) -> np.ndarray:
    """[steps, envs] actions with every greedy action GREEDY."""
    greedy = np.full(num_envs, GREEDY, np.int64)
    return np.stack([explorer.actions(greedy, epsilon) for _ in range(steps)])


def random_runs(column: np.ndarray) -> list[int]:
    """Lengths of the runs of non-greedy steps in one env's action sequence."""
    runs, length = [], 0
    for action in column:
        if action == GREEDY:
            if length:
                runs.append(length)
            length = 0
        else:
            length += 1
    return runs


def test_epsilon_zero_is_greedy_and_actions_stay_in_range():
    explorer = HeldRandomActions(num_envs=8, minimum=0, maximum=2, exponent=2.0, seed=0)
    assert (play(explorer, 0.0, 100, 8) == GREEDY).all()
    actions = play(explorer, 1.0, 200, 8)
    assert set(np.unique(actions)) == {0, 1, 2}


def test_random_actions_are_held_for_heavy_tailed_lengths():
    explorer = HeldRandomActions(num_envs=64, minimum=0, maximum=3, exponent=2.0, seed=1)
    actions = play(explorer, 0.1, 4000, 64)
    runs = [run for env in range(64) for run in random_runs(actions[:, env])]
    # zeta(2): P(1) = 6 / pi^2 ~ 0.61 (a run may also be two holds back to back, which is rare at this epsilon).
    assert 0.5 < np.mean(np.array(runs) == 1) < 0.7
    assert max(runs) >= 100  # the tail: P(n >= 100) ~ 0.6 % of some 3,800 holds
    for env in range(4):  # a hold repeats one action
        column = actions[:, env]
        held = column[column != GREEDY]
        assert np.mean(held[1:] == held[:-1]) > 0.7


@pytest.mark.parametrize("epsilon", [0.05, 0.1, 0.5])
def test_the_share_of_random_steps_is_epsilon(epsilon):
    """Holds start less often than epsilon so that the epsilon schedule keeps its meaning."""
    for exponent in (2.0, 60.0):  # 60: nearly every hold is one step, plain epsilon-greedy
        explorer = HeldRandomActions(num_envs=256, minimum=0, maximum=3, exponent=exponent, seed=3)
        share = np.mean(play(explorer, epsilon, 20_000, 256) != GREEDY)
        assert abs(share - epsilon) < 0.15 * epsilon, (exponent, share)


def test_mean_hold_matches_the_capped_zeta_distribution():
    lengths = np.minimum(np.random.default_rng(0).zipf(2.0, 2_000_000), MAX_HOLD_STEPS)
    assert abs(mean_hold_steps(2.0) - lengths.mean()) < 0.3  # the heavy tail makes the sample mean noisy
    assert abs(mean_hold_steps(60.0) - 1.0) < 1e-9


@pytest.mark.parametrize("exponent", [0.0, 1.0, 0.5])
def test_exponent_must_exceed_one(exponent):
    with pytest.raises(ValueError, match="must be > 1"):
        HeldRandomActions(num_envs=1, minimum=0, maximum=1, exponent=exponent, seed=0)
