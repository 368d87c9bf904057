"""Pure logic of the roles: schedules, interval crossing, episode bookkeeping."""

import numpy as np
import pytest
from tf_agents.trajectories import time_step as ts

from actor.collect import actor_epsilon
from dqn.agent import epsilon_at
from dqn.config import ActorConfig, CommonConfig
from dqn.progress import EpisodeStats
from learner.train import crossed


def test_epsilon_decays_linearly_with_train_step():
    config = CommonConfig(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=100)
    assert epsilon_at(config, 0) == 1.0
    assert epsilon_at(config, 50) == pytest.approx(0.55)
    assert epsilon_at(config, 100) == pytest.approx(0.1)
    assert epsilon_at(config, 10_000) == pytest.approx(0.1)


def test_apex_epsilon_ladder():
    values = [actor_epsilon(ActorConfig(apex_epsilon=True, actor_id=i, num_actors=4), 0) for i in range(4)]
    assert values[0] == pytest.approx(0.4) and values[-1] == pytest.approx(0.4 ** 8)
    assert values == sorted(values, reverse=True)
    assert actor_epsilon(ActorConfig(apex_epsilon=True, actor_id=0, num_actors=1), 0) == pytest.approx(0.4)


@pytest.mark.parametrize("before, after, interval, expected", [
    (0, 1, 100, False), (99, 100, 100, True), (96, 104, 100, True), (100, 104, 100, False), (0, 250, 100, True),
])
def test_crossed(before, after, interval, expected):
    assert crossed(before, after, interval) is expected


def test_episode_stats_across_a_batch():
    stats = EpisodeStats(num_envs=2)
    F, M, L = ts.StepType.FIRST, ts.StepType.MID, ts.StepType.LAST

    def step(step_types, rewards):
        return ts.TimeStep(np.array(step_types, np.int32), np.array(rewards, np.float32), np.ones(2, np.float32),
                           np.zeros((2, 4), np.float32))

    stats.update(step([F, F], [0, 0]))
    stats.update(step([M, M], [1, 1]))
    stats.update(step([L, M], [1, 1]))
    stats.update(step([F, L], [0, 1]))  # env 0 restarts; the FIRST step's reward belongs to no episode
    assert stats.episodes == 2
    assert sorted(stats.recent_returns) == [2.0, 3.0]
    assert sorted(stats.recent_lengths) == [2, 3]
    assert stats.average_return() == pytest.approx(2.5)
