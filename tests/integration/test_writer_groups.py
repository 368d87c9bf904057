"""The writer splits envs over several StructuredWriters; items must still equal TF-Agents' observer's, per env."""

import numpy as np
import pytest
import reverb
import tree
from tf_agents.replay_buffers import reverb_utils
from tf_agents.trajectories import policy_step, trajectory

from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.replay_layout.env_stream_writer import TrajectoryStreams
from dqn.replay_layout.writing import STREAMS_PER_WRITER
from tests.helpers import read_all_items

pytestmark = pytest.mark.integration

NUM_ENVS = 2 * STREAMS_PER_WRITER + 3  # three groups, the last one partial


@pytest.mark.parametrize("sequence_length", [2, 4])
def test_items_equal_tf_agents_observer_across_writer_groups(sequence_length):
    server = reverb.Server([reverb.Table.queue("ours", 100_000), reverb.Table.queue("tf_agents", 100_000)], port=None)
    client = reverb.Client(f"localhost:{server.port}")
    env = GymnasiumVectorEnvironment("CartPole-v1", NUM_ENVS, seed=3, max_episode_steps=12)
    rng = np.random.default_rng(7)
    ours = TrajectoryStreams(client, NUM_ENVS, table="ours", sequence_length=sequence_length)
    observers = [reverb_utils.ReverbAddTrajectoryObserver(client, "tf_agents", sequence_length=sequence_length)
                 for _ in range(NUM_ENVS)]
    time_step = env.reset()
    for _ in range(60):
        action = rng.integers(0, 2, size=NUM_ENVS).astype(np.int64)
        next_time_step = env.step(action)
        ours.append(time_step, action, next_time_step)
        for i, observer in enumerate(observers):
            column = lambda batch, i=i: tree.map_structure(lambda x: x[i], batch)  # noqa: E731
            observer(trajectory.from_transition(column(time_step), policy_step.PolicyStep(action[i]),
                                                column(next_time_step)))
        time_step = next_time_step
    ours.flush(timeout_ms=30_000)
    for observer in observers:
        observer.flush()
    try:
        our_items, their_items = read_all_items(client, "ours"), read_all_items(client, "tf_agents")
        assert len(our_items) == len(their_items) == ours.items_created > 500
        assert sorted(our_items) == sorted(their_items)
    finally:
        ours.close()
        server.stop()


def test_actor_priorities_reach_each_item_exactly():
    """With send_priorities every item's server priority is the one given for the transition it holds.

    Adjacent items share a step, so the writer alternates two priority slots (even/odd start): a mix-up
    between them, or an off-by-one step, gives items their neighbour's priority and fails this test.
    """
    server = reverb.Server([reverb.Table.queue("ours", 100_000), reverb.Table.queue("plain", 100_000)], port=None)
    client = reverb.Client(f"localhost:{server.port}")
    env = GymnasiumVectorEnvironment("CartPole-v1", NUM_ENVS, seed=5, max_episode_steps=9)
    rng = np.random.default_rng(11)
    ours = TrajectoryStreams(client, NUM_ENVS, table="ours", send_priorities=True)
    plain = TrajectoryStreams(client, NUM_ENVS, table="plain")
    given = {}  # bytes of an item's second observation -> the priority given with it (observations are unique)
    time_step = env.reset()
    for _ in range(40):
        action = rng.integers(0, 2, size=NUM_ENVS).astype(np.int64)
        next_time_step = env.step(action)
        closing = rng.uniform(0.01, 1.0, size=NUM_ENVS).astype(np.float32)
        given.update({time_step.observation[i].tobytes(): closing[i] for i in range(NUM_ENVS)})
        ours.append(time_step, action, next_time_step, closing)
        plain.append(time_step, action, next_time_step)
        time_step = next_time_step
    ours.flush(timeout_ms=30_000)
    plain.flush(timeout_ms=30_000)
    try:
        size = client.server_info(timeout=10)["ours"].current_size
        assert size == ours.items_created == plain.items_created > 400
        without_priority = []
        for sample in client.sample("ours", num_samples=size, emit_timesteps=False):
            leaves = [np.asarray(leaf) for leaf in tree.flatten(sample.data)]
            initial_priority = leaves.pop(3)  # the policy_info leaf: [0, p] over the item's two steps
            assert initial_priority[0] == 0.0
            expected = given[leaves[1][1].tobytes()]
            assert sample.info.priority == pytest.approx(expected) == pytest.approx(initial_priority[1])
            without_priority.append(tuple(leaf.tobytes() + str(leaf.shape).encode() for leaf in leaves))
        # Apart from the priority, the items are the plain writer's (which equal TF-Agents' observer's).
        assert sorted(without_priority) == sorted(read_all_items(client, "plain"))
    finally:
        ours.close()
        plain.close()
        server.stop()
