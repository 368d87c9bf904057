"""Block items ([n + 1, E, ...], envs_per_item > 1): exactly each env's windows, priorities, learner rows, masking."""

import dataclasses

import numpy as np
import pytest
import reverb
import tree
from tf_agents.trajectories import time_step as ts

from dqn.replay_layout.env_block_writer import BlockStreams
from dqn.replay_layout.env_stream_writer import TrajectoryStreams
from dqn.replay_layout.items import REPLAY_TABLE
from dqn.replay_layout.writing import STREAMS_PER_WRITER
from tests.conftest import ReplayServer, emptied
from tests.helpers import collect_steps, fill_replay, read_all_items

pytestmark = pytest.mark.integration

ENVS_PER_ITEM = 3
NUM_ENVS = ENVS_PER_ITEM * (STREAMS_PER_WRITER + 2)  # ten blocks: two writers, the second partial


def collect(num_steps, seed):
    """Random-policy batched steps of NUM_ENVS envs with short episodes (terminations and truncations)."""
    return collect_steps(num_steps, max_episode_steps=9, num_envs=NUM_ENVS, seed=seed, action_seed=seed)


def rows(leaves):
    """A block item's leaves [L, E, ...] as E per-env windows, each in `read_all_items`' comparable form."""
    return [tuple(np.ascontiguousarray(leaf[:, e]).tobytes() + str(leaf[:, e].shape).encode() for leaf in leaves)
            for e in range(leaves[0].shape[1])]


@pytest.fixture(scope="module")
def shared_block_server(module_spawn, tmp_path_factory):
    return ReplayServer(module_spawn, tmp_path_factory.mktemp("blocks") / "run", "--samples-per-insert", "0",
                        "--replay-min-size", "40", "--envs-per-item", "4")


@pytest.fixture
def block_server(shared_block_server):
    """A replay server of 4-env blocks with an empty table, shared by the tests that only fill it and sample it."""
    return emptied(shared_block_server, REPLAY_TABLE)


@pytest.fixture
def client():
    server = reverb.Server([reverb.Table.queue(name, 100_000) for name in ("blocks", "per_env")], port=None)
    yield reverb.Client(f"localhost:{server.port}")
    server.stop()


@pytest.mark.parametrize("length", [2, 4], ids=["2-step", "n-step-3"])
def test_block_items_hold_every_window_of_their_envs_and_the_observers_items(client, length):
    steps = collect(50, seed=3)
    blocks = BlockStreams(client, NUM_ENVS, ENVS_PER_ITEM, table="blocks", sequence_length=length)
    per_env = TrajectoryStreams(client, NUM_ENVS, table="per_env", sequence_length=length)  # = TF-Agents' observer
    for time_step, action, next_time_step in steps:
        blocks.append(time_step, action, next_time_step)
        per_env.append(time_step, action, next_time_step)
    blocks.flush(timeout_ms=30_000)
    per_env.flush(timeout_ms=30_000)
    size = client.server_info(timeout=10)["blocks"].current_size
    assert size == blocks.items_created == (len(steps) - length + 1) * NUM_ENVS // ENVS_PER_ITEM

    # Expected: for every time t and block b, the window steps[t : t + L] of the block's envs, env by env.
    expected = {}
    for t in range(len(steps) - length + 1):
        window = steps[t:t + length]
        columns = [np.stack([s[0].step_type for s in window]), np.stack([s[0].observation for s in window]),
                   np.stack([s[1] for s in window]), np.stack([s[2].step_type for s in window]),
                   np.stack([s[2].reward for s in window]), np.stack([s[2].discount for s in window])]
        for b in range(NUM_ENVS // ENVS_PER_ITEM):
            envs = slice(b * ENVS_PER_ITEM, (b + 1) * ENVS_PER_ITEM)
            item = tuple(column[:, envs].tobytes() + str(column[:, envs].shape).encode() for column in columns)
            expected[item] = expected.get(item, 0) + 1
    got, block_rows = {}, []
    for sample in client.sample("blocks", num_samples=size, emit_timesteps=False):
        leaves = [np.asarray(leaf) for leaf in tree.flatten(sample.data)]
        assert leaves[0].shape == (length, ENVS_PER_ITEM)
        item = tuple(leaf.tobytes() + str(leaf.shape).encode() for leaf in leaves)
        got[item] = got.get(item, 0) + 1
        block_rows += [(row, leaves[0][0, e] == ts.StepType.LAST) for e, row in enumerate(rows(leaves))]
    assert got == expected

    # The per-env (observer) items are exactly the block rows that do not start on a boundary step: the
    # extra rows are the ones DqnAgent masks (test below), plus for n-step the windows the observer stops early.
    starts_on_boundary = [row for row, boundary in block_rows if boundary]
    assert starts_on_boundary, "no window started on a boundary step"
    observer_items = read_all_items(client, "per_env")
    if length == 2:
        assert sorted(row for row, boundary in block_rows if not boundary) == sorted(observer_items)
    else:
        assert set(observer_items) <= {row for row, _ in block_rows}
    blocks.close()
    per_env.close()


def test_block_priority_is_the_largest_of_its_envs(client):
    """With send_priorities each block item's priority is the max of the priorities given for its envs' transitions.

    The two alternating priority slots would give items a neighbour's priority on any mix-up or off-by-one.
    """
    steps = collect(30, seed=5)
    blocks = BlockStreams(client, NUM_ENVS, ENVS_PER_ITEM, table="blocks", send_priorities=True)
    given = {}  # bytes of a block's first observations -> the block's expected priority
    for time_step, action, next_time_step in steps:
        closing = np.random.default_rng(len(given)).uniform(0.01, 1.0, size=NUM_ENVS).astype(np.float32)
        for b in range(NUM_ENVS // ENVS_PER_ITEM):
            envs = slice(b * ENVS_PER_ITEM, (b + 1) * ENVS_PER_ITEM)
            # `closing` belongs to the transitions ending at `time_step`, i.e. starting one step earlier.
            given[(b, time_step.observation[envs].tobytes())] = closing[envs].max()
        blocks.append(time_step, action, next_time_step, closing)
    blocks.flush(timeout_ms=30_000)
    size = client.server_info(timeout=10)["blocks"].current_size
    assert size == blocks.items_created > 200
    checked = 0
    for sample in client.sample("blocks", num_samples=size, emit_timesteps=False):
        # Leaves: step_type, observation, action, policy_info (the priority slot: [0, p]), next_step_type, ...
        second_observations, slot = np.asarray(sample.data[1])[1], np.asarray(sample.data[3])
        matches = [value for (b, key), value in given.items() if key == second_observations.tobytes()]
        assert len(matches) == 1
        assert sample.info.priority == pytest.approx(matches[0]) == pytest.approx(slot[1]) and slot[0] == 0
        checked += 1
    assert checked == size
    blocks.close()


@pytest.mark.parametrize("pipeline", ["streams", "as_dataset"])
def test_learner_unblocks_items_into_rows_paired_with_their_key_and_masks_boundaries(block_server, pipeline):
    """The learner's batch rows i*E..i*E+E-1 are item i's envs; DqnAgent gives boundary rows no TD error."""
    from dqn.resolve import resolved_builder
    from dqn.settings.config import LearnerConfig
    from tests.helpers import make_dataset

    envs, server = 4, block_server
    fill_replay(server.address, 2_000, num_envs=8, envs_per_item=envs)
    config = dataclasses.replace(LearnerConfig(replay_address=server.address, batch_size=32, envs_per_item=envs),
                                 replay_dataset=pipeline, train_steps_per_call=2)
    bundle = resolved_builder(config).agent
    iterator = iter(make_dataset(config))
    seen, boundary_rows = {}, 0
    for _ in range(10):
        experience, info = next(iterator)
        assert experience.observation.shape == (64, 2, 4) and experience.action.shape == (64, 2)
        assert info.key.shape == info.probability.shape == (64 // envs,)
        observations = experience.observation.numpy().reshape(64 // envs, envs, 2, 4)
        for key, block in zip(info.key.numpy(), observations, strict=True):
            assert seen.setdefault(int(key), block.tobytes()) == block.tobytes()
        first = tree.map_structure(lambda t: t[:32], experience)
        td_error = bundle.agent.train(first).extra.td_error.numpy()
        boundary = first.step_type.numpy()[:, 0] == ts.StepType.LAST
        boundary_rows += boundary.sum()
        assert (td_error[boundary] == 0).all() and (td_error[~boundary] != 0).any()
    assert boundary_rows > 0 and len(seen) > 50


def test_learner_feed_stages_the_same_rows_as_the_dataset_gives(block_server):
    """The staging call finishes batches (learner/staged_batches.py): each item's rows equal make_dataset's."""
    from dqn.resolve import resolved_builder
    from dqn.settings.config import LearnerConfig
    from learner.staged_batches import StagedBatches
    from tests.helpers import make_dataset

    envs, server = 4, block_server
    fill_replay(server.address, 1_000, num_envs=8, envs_per_item=envs)
    config = LearnerConfig(replay_address=server.address, batch_size=32, envs_per_item=envs)
    builder = resolved_builder(config)
    rows_by_key = {}
    iterator = iter(make_dataset(config))
    for _ in range(40):
        experience, info = next(iterator)
        observations = experience.observation.numpy().reshape(32 // envs, envs, 2, 4)
        rows_by_key.update(zip(info.key.numpy().tolist(), observations, strict=True))
    feed = StagedBatches(builder.make_dataset, builder.layout.finish_batch())
    matched = 0
    try:
        for _ in range(20):
            index = feed.get(timeout_s=30)
            assert index is not None
            experience, info = tree.map_structure(lambda variable: variable.numpy(), feed.slots[index])
            feed.release(index)
            assert experience.observation.shape == (32, 2, 4) and info.key.shape == (32 // envs,)
            for key, block in zip(info.key.tolist(), experience.observation.reshape(-1, envs, 2, 4), strict=True):
                if key in rows_by_key:
                    np.testing.assert_array_equal(block, rows_by_key[key])
                    matched += 1
    finally:
        feed.close()
    assert matched > 10
