"""F13: learner checkpoints that cannot be read, and learner writes that fail on a full disk."""

import glob
import os
import re
import time

import pytest

from dqn.process.progress import read_progress
from tests.conftest import wait_until
from tests.fs import fill, small_filesystem

pytestmark = pytest.mark.integration


def test_F13_truncated_latest_checkpoint_is_quarantined_and_the_learner_resumes_from_the_previous(system_factory):
    system = system_factory()
    learner = system.start_learner()
    system.start_actor(0)
    system.wait_training(450)  # checkpoints every 200 steps: at least two exist
    assert learner.terminate() == 0
    checkpoints = system.root / "learner" / "checkpoints"
    written = {path: os.path.getmtime(path) for path in glob.glob(str(checkpoints / "*"))}
    other_layout = system.start_learner("--layer-norm", "true")  # a network the checkpoints do not fit
    assert other_layout.wait(120) == 2
    assert "--layer-norm / DQN_LAYER_NORM: the learner checkpoint" in other_layout.log()
    assert "layer_norm (then False, now True)" in other_layout.log()
    assert {path: os.path.getmtime(path) for path in glob.glob(str(checkpoints / "*"))} == written  # left as it was
    numbers = sorted(int(re.search(r"ckpt-(\d+)\.index", p).group(1)) for p in glob.glob(str(checkpoints / "*.index")))
    latest, previous = numbers[-1], numbers[-2]
    (data,) = glob.glob(str(checkpoints / f"ckpt-{latest}.data-*"))
    with open(data, "r+b") as handle:  # what a full disk or a storage fault leaves
        handle.truncate(os.path.getsize(data) // 2)

    restarted = system.start_learner()
    wait_until(lambda: "learner starting at train step" in restarted.log(), 90, "the learner to restart")
    log = restarted.log()
    assert f"learner checkpoint {checkpoints / f'ckpt-{latest}'} cannot be read" in log
    assert f"learner starting at train step {previous} " in log
    assert os.path.exists(checkpoints / "quarantine" / os.path.basename(data))
    system.wait_training(previous + 50)
    assert restarted.alive()


def test_F13_learner_keeps_training_when_its_disk_is_full(system_factory, tmp_path):
    system = system_factory()
    system.start_actor(0)
    with small_filesystem(tmp_path / "disk") as disk:
        learner_root = disk / "run"
        learner = system.spawn(
            "learner", "--root-dir", str(learner_root), "--replay-address", system.server.address,
            *system.common()[4:], "--batch-size", "64", "--max-train-steps", "1000000", "--summary-interval", "25",
            "--checkpoint-interval", "100", "--export-interval", "150", "--no-data-timeout-s", "3", name="learner")
        wait_until(lambda: read_progress(str(learner_root / "learner")).get("train_step", 0) >= 200, 120,
                   "the learner to train and checkpoint")
        filler = fill(disk)
        wait_until(lambda: "learner checkpoint at train step" in learner.log() and " failed (" in learner.log(), 90,
                   "a checkpoint on the full disk")
        wait_until(lambda: "policy export failed" in learner.log() and "summaries failed" in learner.log(), 90,
                   "an export and a summary write on the full disk")
        assert learner.alive()
        filler.unlink()
        stuck_at = read_progress(str(learner_root / "learner")).get("train_step", 0)
        wait_until(lambda: read_progress(str(learner_root / "learner")).get("train_step", 0) >= stuck_at + 200, 120,
                   "training to go on after space came back")
        assert learner.terminate() == 0
        assert "Traceback" not in learner.log()
        assert read_progress(str(learner_root / "learner")).get("done")


def write_nan_rewards(address: str, transitions: int) -> None:
    """Writes CartPole transitions whose rewards are all NaN straight into replay (past the actor's guard)."""
    import numpy as np
    import reverb

    from dqn.envs.vector_env import GymnasiumVectorEnvironment
    from dqn.replay_layout.env_block_writer import BlockStreams

    env = GymnasiumVectorEnvironment("CartPole-v1", 16, seed=3)
    streams = BlockStreams(reverb.Client(address), 16, 4)  # no specs given: nothing checks the batches
    time_step = env.reset()
    while streams.items_created * 4 < transitions:
        action = np.zeros(16, dtype=np.int64)
        next_time_step = env.step(action)
        streams.append(time_step, action, next_time_step._replace(reward=np.full(16, np.nan, np.float32)))
        streams.wait_for_server(max_pending_per_stream=4, timeout_ms=30_000)  # below Reverb's pending warning
        time_step = next_time_step
    streams.close(timeout_ms=60_000)
    env.close()


def test_non_finite_losses_are_skipped_and_no_non_finite_weights_are_saved_or_published(
        replay_server_factory, spawn, tmp_path):
    import numpy as np
    import tensorflow as tf

    from dqn.remote.weights_puller import fetch_weights
    from tests.conftest import FAST_FLAGS
    from tests.helpers import NO_LIMITER, fill_replay

    server = replay_server_factory(*FAST_FLAGS, *NO_LIMITER)
    fill_replay(server.address, 4_000, envs_per_item=4)
    root = tmp_path / "run"
    learner = spawn("learner", "--root-dir", str(root), "--replay-address", server.address, *FAST_FLAGS,
                    "--batch-size", "64", "--max-train-steps", "1000000", "--checkpoint-interval", "100",
                    "--publish-interval", "25", "--summary-interval", "25", name="learner")
    wait_until(lambda: read_progress(str(root / "learner")).get("train_step", 0) >= 250, 120, "training on good data")
    write_nan_rewards(server.address, 20_000)  # five times the good data: nearly every batch holds a NaN reward
    wait_until(lambda: "rolled back to" in learner.log(), 120, "a roll-back")
    trained = read_progress(str(root / "learner")).get("train_step", 0)
    time.sleep(5)  # more non-finite batches: skipped or rolled back, the learner stays up
    assert learner.alive(), learner.log()
    assert learner.terminate() == 0
    assert "Traceback" not in learner.log()
    checkpoints = root / "learner" / "checkpoints"
    for prefix in {p[: -len(".index")] for p in glob.glob(str(checkpoints / "ckpt-*.index"))}:
        reader = tf.train.load_checkpoint(prefix)
        for name, dtype in reader.get_variable_to_dtype_map().items():
            if dtype.is_floating:
                assert np.isfinite(reader.get_tensor(name)).all(), (prefix, name)
    published = fetch_weights(server.address, 10)
    assert published is not None and all(np.isfinite(v).all() for v in published.variables)
    assert published.train_step <= trained + 1_000
