"""The count bonus on real gymnasium observations: one code per Taxi state, fading bonus on CartPole's floats."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from dqn.envs.making import env_specs
from dqn.model.count_bonus import CountBonus


def random_play(env_id: str, steps: int, seed: int = 0) -> np.ndarray:
    """The observations of `steps` uniformly random steps (reset at each episode's end)."""
    env = gym.make(env_id)
    observation, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    observations = []
    for _ in range(steps):
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(observation)
        if terminated or truncated:
            observation, _ = env.reset()
    env.close()
    return np.asarray(observations)


def test_each_taxi_state_gets_its_own_code_and_its_bonus_falls_as_one_over_root_n():
    bonus = CountBonus(env_specs("Taxi-v4").observation, beta=0.5, seed=3)
    states = np.arange(500, dtype=np.int64)
    assert len(set(bonus.codes(states).tolist())) >= 495  # 16 random bits per state: a handful of collisions at most
    first = bonus.bonus(np.array([7, 7, 7, 7], np.int64))
    np.testing.assert_allclose(first, 0.5 / np.sqrt([1, 2, 3, 4]), rtol=1e-6)
    assert bonus.bonus(np.array([8], np.int64))[0] == pytest.approx(0.5)  # a state not reached yet pays in full


def test_episode_starts_pay_nothing_and_leave_the_actors_counts_alone():
    bonus = CountBonus(env_specs("Taxi-v4").observation, beta=1.0, seed=0)
    paid = bonus.bonus(np.array([5, 5], np.int64), first=np.array([True, False]))
    np.testing.assert_allclose(paid, [0.0, 1.0])
    assert sum(bonus.counts.values()) == 1


def test_episodic_counts_start_afresh_with_each_episode_and_per_env():
    bonus = CountBonus(env_specs("Taxi-v4").observation, beta=1.0, seed=0, scope="episode")
    start = np.array([True, True])
    assert bonus.bonus(np.array([5, 5], np.int64), first=start).tolist() == [0.0, 0.0]  # counted, not paid
    # Staying put (a move into a wall): the bonus falls within the episode; env 1 moves to a state new to it.
    np.testing.assert_allclose(bonus.bonus(np.array([5, 6], np.int64)), [1 / np.sqrt(2), 1.0], rtol=1e-6)
    np.testing.assert_allclose(bonus.bonus(np.array([5, 5], np.int64)), [1 / np.sqrt(3), 1 / np.sqrt(2)], rtol=1e-6)
    # A new episode in env 0 forgets its counts; env 1's go on.
    bonus.bonus(np.array([9, 6], np.int64), first=np.array([True, False]))
    np.testing.assert_allclose(bonus.bonus(np.array([5, 6], np.int64)), [1.0, 1 / np.sqrt(3)], rtol=1e-6)
    assert not bonus.counts  # the actor-wide counts are not used


def test_continuous_observations_share_buckets_so_the_bonus_fades():
    observations = random_play("CartPole-v1", 30_000)
    bonus = CountBonus(env_specs("CartPole-v1").observation, beta=1.0, seed=0)
    bonus.observe_random_play(observations[:1000])
    bonus.freeze()
    early = bonus.bonus(observations[1000:6000])
    bonus.bonus(observations[6000:25_000])
    late = bonus.bonus(observations[25_000:])
    assert len(bonus.counts) < 1000  # 29,000 distinct float observations in far fewer buckets
    assert late.mean() < 0.7 * early.mean()
    bonus.observe_random_play(observations[:10])  # frozen: the buckets keep their meaning
    np.testing.assert_array_equal(bonus.codes(observations[:50]), bonus.codes(observations[:50]))


def test_a_dict_observation_with_an_int8_mask_is_hashed_over_every_part():
    space = gym.spaces.Dict({"board": gym.spaces.Box(0, 1, (3, 3), np.int8),
                             "action_mask": gym.spaces.MultiBinary(9)})
    from dqn.envs.spaces import observation_spec

    bonus = CountBonus(observation_spec(space), beta=1.0, seed=0)
    boards = np.random.default_rng(0).integers(0, 2, (200, 3, 3)).astype(np.int32)
    masks = (1 - boards.reshape(200, 9)).astype(np.uint8)
    bonus.observe_random_play({"action_mask": masks, "board": boards})
    bonus.freeze()
    paid = bonus.bonus({"action_mask": masks, "board": boards})
    assert paid.shape == (200,) and np.all(paid > 0) and np.all(paid <= 1.0)
    assert len(bonus.counts) > 50  # 512 boards: many distinct codes
