"""Held random actions (temporally extended epsilon-greedy): hold lengths, the share of random steps, epsilon 0."""

import numpy as np
import pytest

from dqn.model.exploration import MAX_HOLD_STEPS, HeldRandomActions, mean_hold_steps

GREEDY = -1  # outside the action range, so a test can tell greedy steps from random ones


def play(explorer: HeldRandomActions, epsilon: float, steps: int, num_envs: int,
         episode_steps: int | None = None) -> np.ndarray:
    """[steps, envs] actions with every greedy action GREEDY; episodes of `episode_steps` (staggered) or endless."""
    greedy = np.full(num_envs, GREEDY, np.int64)
    offsets = np.arange(num_envs) % (episode_steps or 1)
    return np.stack([explorer.actions(greedy, epsilon, None if episode_steps is None else
                                      (step + offsets) % episode_steps == 0) for step in range(steps)])


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
    repeats = []  # a hold repeats one action: consecutive random steps mostly belong to one hold
    for env in range(64):
        held = actions[:, env][actions[:, env] != GREEDY]
        repeats.extend(held[1:] == held[:-1])
    assert np.mean(repeats) > 0.7


@pytest.mark.parametrize("epsilon", [0.05, 0.1, 0.5])
def test_the_share_of_random_steps_is_epsilon(epsilon):
    """Holds start less often than epsilon so that the epsilon schedule keeps its meaning."""
    for exponent in (2.0, 60.0):  # 60: nearly every hold is one step, plain epsilon-greedy
        explorer = HeldRandomActions(num_envs=256, minimum=0, maximum=3, exponent=exponent, seed=3)
        share = np.mean(play(explorer, epsilon, 20_000, 256) != GREEDY)
        assert abs(share - epsilon) < 0.15 * epsilon, (exponent, share)


@pytest.mark.parametrize("episode_steps", [10, 200])
def test_holds_end_with_their_episode_and_the_share_stays_epsilon(episode_steps):
    """Cut holds are shorter, so they start more often: the running mean hold keeps the random share at epsilon."""
    explorer = HeldRandomActions(num_envs=256, minimum=0, maximum=3, exponent=2.0, seed=4)
    actions = play(explorer, 0.1, 20_000, 256, episode_steps)
    assert abs(np.mean(actions[2_000:] != GREEDY) - 0.1) < 0.01
    assert explorer.mean_hold < 0.7 * mean_hold_steps(2.0)
    # Where an episode's last step was random, the next episode's first step repeats it only if a new hold starts
    # there (p ~ 0.04) and draws the same action (1 in 4); a hold carried on would repeat it most of the time.
    carried, random_before = 0, 0
    for env in range(256):
        first_steps = np.flatnonzero((np.arange(20_000) + env % episode_steps) % episode_steps == 0)[1:]
        before, after = actions[first_steps - 1, env], actions[first_steps, env]
        random_before += int(np.sum(before != GREEDY))
        carried += int(np.sum((before != GREEDY) & (before == after)))
    assert carried / random_before < 0.05


def test_mean_hold_matches_the_capped_zeta_distribution():
    lengths = np.minimum(np.random.default_rng(0).zipf(2.0, 2_000_000), MAX_HOLD_STEPS)
    assert abs(mean_hold_steps(2.0) - lengths.mean()) < 0.3  # the heavy tail makes the sample mean noisy
    assert abs(mean_hold_steps(60.0) - 1.0) < 1e-9


@pytest.mark.parametrize("exponent", [0.0, 1.0, 0.5])
def test_exponent_must_exceed_one(exponent):
    with pytest.raises(ValueError, match="must be > 1"):
        HeldRandomActions(num_envs=1, minimum=0, maximum=1, exponent=exponent, seed=0)
