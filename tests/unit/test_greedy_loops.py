"""Escaping greedy loops on real Taxi-v4 envs: a greedy policy back in a state it met starts a random hold."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.model.collect_policy import GreedyLoops, HeldRandomCollectPolicy
from dqn.model.exploration import HeldRandomActions
from dqn.resolve import resolved_builder
from dqn.settings.common import CommonConfig
from dqn.settings.config import ActorConfig
from dqn.settings.loading import ConfigError

SOUTH, NORTH = 0, 1  # Taxi's actions: 0 south, 1 north, 2 east, 3 west, 4 pick up, 5 drop off
NUM_ENVS = 8


class StuckGreedy:
    """A greedy policy that loops, as a learned one can: north into the top wall, or north and south in turn."""

    runs_in = "numpy"

    def __init__(self, envs: list, oscillate: bool):
        self._envs, self._oscillate = envs, oscillate

    def actions(self, time_step):
        rows = np.array([env.unwrapped.decode(env.unwrapped.s)[0] for env in self._envs])
        actions = np.where((rows == 0) & self._oscillate, SOUTH, NORTH)
        return actions.astype(np.int64), None

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


def play(escape: bool, oscillate: bool, steps: int = 200) -> np.ndarray:
    """[steps + 1, envs] Taxi states visited by a looping greedy policy at epsilon 0, with or without escaping."""
    envs = taxi_envs_in_top_row()
    holds = HeldRandomActions(NUM_ENVS, minimum=0, maximum=5, exponent=2.0, seed=3)
    policy = HeldRandomCollectPolicy(StuckGreedy(envs, oscillate), holds, epsilon=0.0, escape_greedy_loops=escape)
    states = [[int(env.unwrapped.s) for env in envs]]
    time_step = batch(states[0], ts.StepType.FIRST)
    for _ in range(steps):
        actions, _ = policy.actions(time_step)
        states.append([int(env.step(int(action))[0]) for env, action in zip(envs, actions, strict=True)])
        time_step = batch(states[-1])
    return np.asarray(states)


@pytest.mark.parametrize("oscillate, loop_length", [(False, 1), (True, 2)])
def test_a_looping_greedy_policy_stays_in_its_loop_without_escaping(oscillate, loop_length):
    states = play(escape=False, oscillate=oscillate)
    assert all(len(np.unique(states[:, env])) == loop_length for env in range(NUM_ENVS))


@pytest.mark.parametrize("oscillate, loop_length", [(False, 1), (True, 2)])
def test_escaping_leaves_the_loop(oscillate, loop_length):
    states = play(escape=True, oscillate=oscillate)
    assert all(len(np.unique(states[:, env])) > loop_length for env in range(NUM_ENVS))


def test_loops_are_states_met_again_in_one_chain_of_greedy_steps():
    loops = GreedyLoops(3)
    assert not loops.find(batch([1, 2, 3], ts.StepType.FIRST)).any()
    assert not loops.find(batch([4, 5, 6])).any()
    assert loops.find(batch([1, 5, 7])).tolist() == [True, True, False]
    loops.forget(np.array([True, False, False]))  # env 0 acts randomly: its chain starts afresh
    assert loops.find(batch([1, 2, 3], np.array([ts.StepType.MID, ts.StepType.MID, ts.StepType.FIRST]))).tolist() \
        == [False, True, False]  # env 2 begins an episode: nothing met yet in it


def test_escaping_needs_held_random_actions():
    with pytest.raises(ConfigError, match="escape_greedy_loops"):
        CommonConfig(escape_greedy_loops=True, epsilon_hold_exponent=0.0).check()


def states_met_under_the_actor_policy(escape: bool) -> int:
    """Distinct states 8 real Taxi-v4 envs meet in 100 steps of the service's collect policy at epsilon 0 (summed).

    The policy is the builder's own (numpy Q-network mirror, holds), its Q-network set to prefer north everywhere.
    """
    config = ActorConfig(env_id="Taxi-v4", fc_layer_params=(16,), observation_history=1, samples_per_insert=4.0,
                         action_mask="none", escape_greedy_loops=escape)
    builder = resolved_builder(config)
    for network in (builder.agent.agent._q_network, builder.agent.agent._target_q_network):
        head = network.layers[-1]
        head.kernel.assign(tf.zeros_like(head.kernel))
        head.bias.assign(np.eye(6, dtype=np.float32)[NORTH] * 10.0)
    policy = builder.make_collect_policy(NUM_ENVS, seed=3)
    policy.set_weights([variable.numpy() for variable in builder.agent.policy_variables])
    policy.set_epsilon(0.0)
    envs = builder.make_envs(NUM_ENVS, seed=1)
    time_step, met = envs.reset(), [set() for _ in range(NUM_ENVS)]
    for _ in range(100):
        for env, state in enumerate(time_step.observation):
            met[env].add(int(state))
        time_step = envs.step(policy.actions(time_step)[0])
    envs.close()
    return sum(len(states) for states in met)


def test_the_builders_collect_policy_escapes_only_when_asked():
    stuck, escaping = states_met_under_the_actor_policy(False), states_met_under_the_actor_policy(True)
    assert stuck <= 5 * NUM_ENVS  # north until the top wall: at most the 5 rows of one column per env
    assert escaping > 2 * stuck
