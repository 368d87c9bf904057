"""n-step items reach past episode ends, and the learner's rewrite makes every target the exact n-step return.

Real CartPole envs (episodes end by termination and by truncation), our batched writer, a real Reverb
server; the targets TF-Agents' DqnAgent computes from the sampled items are compared with targets
computed by hand from the recorded episodes.
"""

import numpy as np
import pytest
import reverb
import tensorflow as tf
import tree
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from dqn.replay_layout.env_stream_writer import TrajectoryStreams
from dqn.replay_layout.unpack import close_episode_ends
from tests.helpers import NUM_ENVS, collect_steps, read_all_items

pytestmark = pytest.mark.integration

N = 3
GAMMA = 0.9  # far from 1, so a discount off by one power of gamma shows


@pytest.fixture
def client():
    server = reverb.Server([reverb.Table.queue("ours", 100_000), reverb.Table.queue("observer_rule", 100_000)],
                           port=None)
    yield reverb.Client(f"localhost:{server.port}")
    server.stop()


def expected_target(steps, env, start):
    """(n-step discounted reward, bootstrap discount incl. gamma^m, bootstrap observation) from the raw steps."""
    reward, factor = 0.0, 1.0
    for offset in range(N):
        _, _, next_time_step = steps[start + offset]
        reward += factor * float(next_time_step.reward[env])
        factor *= GAMMA * float(next_time_step.discount[env])
        if next_time_step.step_type[env] == ts.StepType.LAST:  # the episode ended after offset + 1 steps
            return reward, factor, next_time_step.observation[env]
    return reward, factor, steps[start + N][0].observation[env]


def test_every_episode_step_starts_an_item_and_targets_are_exact(client):
    steps = collect_steps(num_steps=200, max_episode_steps=20)
    ours = TrajectoryStreams(client, NUM_ENVS, table="ours", sequence_length=N + 1, run_past_episode_end=True)
    observer_rule = TrajectoryStreams(client, NUM_ENVS, table="observer_rule", sequence_length=N + 1)
    for index, step in enumerate(steps):
        ours.append(*step)
        observer_rule.append(*step)
        if index % 10 == 9:  # keeps Reverb's pending-item count (and its warnings) low
            ours.flush(timeout_ms=30_000)
            observer_rule.flush(timeout_ms=30_000)
    ours.flush(timeout_ms=30_000)
    observer_rule.flush(timeout_ms=30_000)

    # Which (env, start) each window should begin at: every step that is not a boundary (LAST -> FIRST).
    starts = {(env, t) for env in range(NUM_ENVS) for t in range(len(steps) - N)
              if steps[t][0].step_type[env] != ts.StepType.LAST}
    by_observation = {steps[t][0].observation[env].tobytes(): (env, t) for env, t in starts}
    assert len(by_observation) == len(starts)  # CartPole observations are unique floats: a usable key
    samples = list(client.sample("ours", num_samples=ours.items_created, emit_timesteps=False,
                                 unpack_as_table_signature=False))
    assert ours.items_created == len(starts) == len(samples)
    observer_items = set(read_all_items(client, "observer_rule"))
    assert len(observer_items) < len(starts)  # the observer's rule drops the last N - 1 starts of every episode

    leaves = [np.stack([np.asarray(s.data[k]) for s in samples]) for k in range(6)]
    windows = trajectory.Trajectory(step_type=leaves[0], observation=leaves[1], action=leaves[2], policy_info=(),
                                    next_step_type=leaves[3], reward=leaves[4], discount=leaves[5])
    found = [by_observation[np.asarray(s.data[1])[0].tobytes()] for s in samples]
    assert set(found) == starts
    crosses = (windows.step_type[:, :N] == ts.StepType.LAST).any(axis=1)
    ended_by = {"termination": 0, "truncation": 0}
    transition = trajectory.to_n_step_transition(close_episode_ends(tree.map_structure(tf.constant, windows), GAMMA),
                                                 GAMMA)
    for row, (env, start) in enumerate(found):
        reward, discount, bootstrap_observation = expected_target(steps, env, start)
        # DqnAgent's target: reward + gamma * next_time_step.discount * max_a Q(next observation, a).
        assert transition.next_time_step.reward[row].numpy() == pytest.approx(reward, abs=1e-5)
        assert GAMMA * transition.next_time_step.discount[row].numpy() == pytest.approx(discount, abs=1e-6)
        if discount > 0:
            np.testing.assert_array_equal(transition.next_time_step.observation[row].numpy(), bootstrap_observation)
        if crosses[row]:
            ended_by["termination" if discount == 0 else "truncation"] += 1
        else:  # windows inside one episode are the observer's items, untouched
            assert tuple(np.asarray(leaf).tobytes() + str(np.asarray(leaf).shape).encode()
                         for leaf in tree.flatten(samples[row].data)) in observer_items
    assert ended_by["termination"] > 10 and ended_by["truncation"] > 10, ended_by
