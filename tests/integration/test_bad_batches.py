"""Replay items that pass the table's signature but hold what no actor writes, forged from a second client while a
real learner trains: each batch holding one is skipped, counted, and its bad items are deleted from the table. An
item of other shapes is skipped, counted, found by its shapes and deleted too."""

import numpy as np
import pytest
import reverb
import tree

from dqn.process.progress import read_progress
from dqn.replay_layout.items import REPLAY_TABLE
from tests.conftest import FAST_FLAGS, wait_until
from tests.events import read_scalars
from tests.helpers import NO_LIMITER, fill_replay

pytestmark = pytest.mark.integration


def genuine_item(client: reverb.Client):
    """One item of the table as its signature unpacks it: a Trajectory of leaves [steps, envs, ...]."""
    sample = next(client.sample(REPLAY_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
    return tree.map_structure(np.asarray, sample.data)


def write_item(client: reverb.Client, item) -> None:
    """Writes `item` as actors do (a TrajectoryWriter checks it against the table signature: it passes)."""
    steps = tree.flatten(item)[0].shape[0]
    with client.trajectory_writer(num_keep_alive_refs=steps) as writer:
        for t in range(steps):
            writer.append(tree.map_structure(lambda leaf, t=t: leaf[t], item))
        writer.create_item(REPLAY_TABLE, 1.0, tree.map_structure(lambda column: column[:], writer.history))
        writer.flush()


def table_size(client: reverb.Client) -> int:
    return client.server_info(timeout=10)[REPLAY_TABLE].current_size


def all_items(client: reverb.Client, draws: int = 3_000) -> list:
    """Items drawn uniformly from a table of a few dozen: every item is among them. Flat leaves as stored (no
    unpacking, which would fail on a misshapen item)."""
    return [[np.asarray(leaf) for leaf in sample.data]
            for sample in client.sample(REPLAY_TABLE, num_samples=draws, emit_timesteps=False)]


def test_forged_items_are_skipped_counted_and_deleted_while_the_learner_trains(replay_server_factory, spawn,
                                                                               tmp_path):
    # No rate limiter and no actors: the table holds exactly the good items, the forged ones, and nothing else.
    server = replay_server_factory(*FAST_FLAGS, *NO_LIMITER)
    fill_replay(server.address, 200, envs_per_item=4)
    client = reverb.Client(server.address)
    good = table_size(client)
    root = tmp_path / "run"
    learner = spawn("learner", "--root-dir", str(root), "--replay-address", server.address, *FAST_FLAGS,
                    "--batch-size", "64", "--max-train-steps", "1000000", "--summary-interval", "25", name="learner")
    wait_until(lambda: read_progress(str(root / "learner")).get("train_step", 0) >= 100, 120, "training on good data")

    item = genuine_item(client)
    write_item(client, item._replace(action=np.full_like(item.action, 7)))  # CartPole's actions are 0 and 1
    write_item(client, item._replace(step_type=np.full_like(item.step_type, 5)))
    write_item(client, item._replace(discount=np.full_like(item.discount, np.nan)))

    wait_until(lambda: table_size(client) == good, 120, "the forged items to be deleted from the table")
    wait_until(lambda: read_progress(str(root / "learner")).get("bad_items_deleted", 0) >= 3, 30,
               "the progress file to count the deleted items")
    trained = read_progress(str(root / "learner"))["train_step"]
    wait_until(lambda: read_progress(str(root / "learner")).get("train_step", 0) >= trained + 200, 120,
               "training to go on")
    assert learner.alive(), learner.log()
    progress = read_progress(str(root / "learner"))
    assert progress["bad_batches_skipped"] >= 1 and progress["bad_items_deleted"] == 3, progress
    assert "charts/bad_batches_skipped" in read_scalars(root / "learner")
    log = learner.log()
    assert "skipped a replay batch holding" in log and "deleted them from the replay table" in log, log
    assert log.count("skipped a replay batch") == 1, "one line a minute, however many batches"
    # What is left is exactly the good items.
    for step_type, _, action, _, _, discount in all_items(client):
        assert set(np.unique(action)) <= {0, 1} and np.isin(step_type, (0, 1, 2)).all()
        assert np.isfinite(discount).all()

    # An item of other shapes (a client's `insert` adds a leading axis): Reverb's dataset refuses it without naming
    # its key, so the batch is skipped and counted; a search with the plain sampler finds its key and deletes it.
    skipped = read_progress(str(root / "learner"))["bad_batches_skipped"]
    client.insert(item, priorities={REPLAY_TABLE: 1.0})
    assert table_size(client) == good + 1
    wait_until(lambda: read_progress(str(root / "learner")).get("bad_batches_skipped", 0) > skipped, 120,
               "a batch holding the misshapen item to be skipped")
    wait_until(lambda: table_size(client) == good, 120, "the misshapen item to be found and deleted")
    wait_until(lambda: read_progress(str(root / "learner")).get("bad_items_deleted", 0) == 4, 30,
               "the progress file to count the deleted item")
    trained = read_progress(str(root / "learner"))["train_step"]
    wait_until(lambda: read_progress(str(root / "learner")).get("train_step", 0) >= trained + 300, 120,
               "training to go on without the misshapen item")
    assert learner.alive() and "Traceback" not in learner.log()
    assert all(len(leaves) == len(all_items(client, 1)[0]) for leaves in all_items(client))
    assert learner.terminate() == 0
