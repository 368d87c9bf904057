"""Our batched writer creates exactly the items TF-Agents' ReverbAddTrajectoryObserver creates per env."""

import numpy as np
import pytest
import reverb
import tree
from tf_agents.replay_buffers import reverb_utils
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from dqn.replay_layout.env_stream_writer import TrajectoryStreams
from tests.helpers import NUM_ENVS, collect_steps, read_all_items

pytestmark = pytest.mark.integration


@pytest.fixture
def server():
    tables = [reverb.Table.queue("ours", 100_000), reverb.Table.queue("tf_agents", 100_000)]
    server = reverb.Server(tables, port=None)
    yield reverb.Client(f"localhost:{server.port}")
    server.stop()


@pytest.mark.parametrize("sequence_length", [2, 4], ids=["book-2-step", "n-step-3"])
def test_items_equal_tf_agents_observer(server, sequence_length):
    steps = collect_steps(num_steps=150, max_episode_steps=15)
    last = np.stack([s[2].step_type for s in steps]) == ts.StepType.LAST
    discounts = np.stack([s[2].discount for s in steps])
    assert (last & (discounts == 0)).any(), "no episode ended by termination"
    assert (last & (discounts == 1)).any(), "no episode ended by truncation"

    ours = TrajectoryStreams(server, NUM_ENVS, table="ours", sequence_length=sequence_length)
    observers = [reverb_utils.ReverbAddTrajectoryObserver(server, "tf_agents", sequence_length=sequence_length)
                 for _ in range(NUM_ENVS)]
    for time_step, action, next_time_step in steps:
        ours.append(time_step, action, next_time_step)
        for i, observer in enumerate(observers):
            column = lambda batch, i=i: tree.map_structure(lambda x: x[i], batch)  # noqa: E731
            observer(trajectory.from_transition(column(time_step), policy_step.PolicyStep(action[i]),
                                                column(next_time_step)))
    ours.flush(timeout_ms=30_000)
    for observer in observers:
        observer.flush()

    our_items = read_all_items(server, "ours")
    their_items = read_all_items(server, "tf_agents")
    assert len(our_items) == len(their_items) > 200
    assert sorted(our_items) == sorted(their_items)


def test_no_item_spans_two_episodes(server):
    steps = collect_steps(num_steps=80, max_episode_steps=10)
    writer = TrajectoryStreams(server, NUM_ENVS, table="ours")
    for step in steps:
        writer.append(*step)
    writer.flush(timeout_ms=30_000)
    for sample in server.sample("ours", num_samples=writer.items_created, emit_timesteps=False,
                                unpack_as_table_signature=False):
        step_type = np.asarray(sample.data[0])  # Trajectory leaves flatten in field order: step_type first
        assert step_type.dtype == np.int32 and step_type.shape == (2,)
        # A window may end an episode (MID -> LAST) or hold the boundary step (LAST -> FIRST) last,
        # but never continue past a boundary: FIRST may only open a window.
        assert step_type[1] != ts.StepType.FIRST
        assert not (step_type[0] == ts.StepType.LAST)


def test_bad_batches_are_refused_before_sending(server):
    from dqn.envs.making import env_specs
    from dqn.replay_layout.writing import InvalidItem

    observation_spec, action_spec, _, _ = env_specs("CartPole-v1")
    writer = TrajectoryStreams(server, NUM_ENVS, table="ours", observation_spec=observation_spec,
                               action_spec=action_spec)
    time_step, action, next_time_step = collect_steps(num_steps=2, max_episode_steps=10)[1]
    writer.append(time_step, action, next_time_step)  # a good batch passes
    with pytest.raises(InvalidItem, match="actions outside"):
        writer.append(time_step, action + 5, next_time_step)
    with pytest.raises(InvalidItem, match="does not match"):
        writer.append(time_step, action, next_time_step._replace(observation=next_time_step.observation[:, :2]))
    nan = next_time_step.observation.copy()
    nan[0, 0] = np.nan
    with pytest.raises(InvalidItem, match="NaN"):
        writer.append(time_step, action, next_time_step._replace(observation=nan))
    writer.flush(timeout_ms=10_000)
    assert server.server_info(timeout=10)["ours"].current_size == 0  # only 1 step per stream: no item yet
