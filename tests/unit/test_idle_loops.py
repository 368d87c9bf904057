"""Escaping idle loops: a greedy repeat of an action that left a real Taxi-v4 state unchanged starts a random hold."""

import gymnasium as gym
import numpy as np
import pytest
from tf_agents.trajectories import time_step as ts

from dqn.model.collect_policy import HeldRandomCollectPolicy, IdleRepeats
from dqn.model.exploration import HeldRandomActions
from dqn.settings.common import CommonConfig
from dqn.settings.loading import ConfigError

NORTH = 1  # Taxi's actions: 0 south, 1 north, 2 east, 3 west, 4 pick up, 5 drop off
NUM_ENVS = 8


class AlwaysNorth:
    """A greedy policy stuck on one action, as a learned one that bumps into Taxi's top wall."""

    runs_in = "numpy"

    def actions(self, time_step):
        return np.full(len(time_step.step_type), NORTH, np.int64), None

    def set_epsilon(self, epsilon):
        pass


def taxi_envs_in_top_row() -> list:
    """Real Taxi-v4 envs, each with its taxi in row 0 (north is a wall), the passenger and destination apart."""
    envs = []
    for index in range(NUM_ENVS):
        env = gym.make("Taxi-v4")
        env.reset(seed=index)
        env.unwrapped.s = env.unwrapped.encode(0, index % 5, 0, 1)
        envs.append(env)
    return envs


def batch(observations, step_type=ts.StepType.MID) -> ts.TimeStep:
    count = len(observations)
    return ts.TimeStep(step_type=np.full(count, step_type, np.int32), reward=np.zeros(count, np.float32),
                       discount=np.ones(count, np.float32), observation=np.asarray(observations, np.int64))


def play(escape: bool, steps: int = 50) -> np.ndarray:
    """[steps, envs] Taxi states visited by the stuck greedy policy at epsilon 0, with or without escaping."""
    envs = taxi_envs_in_top_row()
    holds = HeldRandomActions(NUM_ENVS, minimum=0, maximum=5, exponent=2.0, seed=3)
    policy = HeldRandomCollectPolicy(AlwaysNorth(), holds, epsilon=0.0, escape_idle_loops=escape)
    states = [[int(env.unwrapped.s) for env in envs]]
    time_step = batch(states[0], ts.StepType.FIRST)
    for _ in range(steps):
        actions, _ = policy.actions(time_step)
        states.append([int(env.step(int(action))[0]) for env, action in zip(envs, actions, strict=True)])
        time_step = batch(states[-1])
    return np.asarray(states)


def test_a_stuck_greedy_policy_stays_put_without_escaping():
    states = play(escape=False)
    assert (states == states[0]).all()


def test_escaping_leaves_the_state_a_stuck_greedy_policy_loops_in():
    states = play(escape=True)
    assert (states[-1] != states[0]).sum() >= NUM_ENVS // 2
    assert all(len(np.unique(states[:, env])) > 1 for env in range(NUM_ENVS))


def test_idle_repeats_need_an_unchanged_observation_the_same_action_and_no_new_episode():
    envs = taxi_envs_in_top_row()
    before = [int(env.unwrapped.s) for env in envs]
    after = [int(env.step(NORTH)[0]) for env in envs]
    assert after == before  # north from row 0 is a move into the wall
    repeats = IdleRepeats()
    assert repeats.find(batch(before), np.full(NUM_ENVS, NORTH)) is None  # nothing remembered yet
    repeats.remember(batch(before), np.full(NUM_ENVS, NORTH))
    assert repeats.find(batch(after), np.full(NUM_ENVS, NORTH)).all()
    assert not repeats.find(batch(after), np.full(NUM_ENVS, 0)).any()  # another action is no repeat
    assert not repeats.find(batch(after, ts.StepType.FIRST), np.full(NUM_ENVS, NORTH)).any()
    moved = [int(env.step(0)[0]) for env in envs]  # south: every taxi leaves row 0
    assert not repeats.find(batch(moved), np.full(NUM_ENVS, NORTH)).any()


def test_escaping_needs_held_random_actions():
    with pytest.raises(ConfigError, match="escape_idle_loops"):
        CommonConfig(escape_idle_loops=True, epsilon_hold_exponent=0.0).check()
