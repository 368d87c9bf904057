"""F13: learner checkpoints that cannot be read, and learner writes that fail on a full disk."""

import glob
import os
import re

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
