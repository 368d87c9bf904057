"""Fault matrix rows for the replay server alone: F6 (SIGTERM), F7 (kill during checkpoint), F8 (corrupt)."""

import os
import signal
import threading
import time

import pytest
import reverb

from dqn.replay_layout.items import REPLAY_TABLE
from replay_server.recovery import complete_checkpoints
from tests.conftest import run_cli, wait_until
from tests.helpers import NO_LIMITER, fill_and_count

pytestmark = pytest.mark.integration

# These tests write without a learner sampling: a samples-per-insert limiter (on by default) would hold the
# writes back once inserts run ahead of samples, so the server runs with only a min-size limiter here.


def test_F6_sigterm_writes_a_final_checkpoint_and_exits_0(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "0")
    size = fill_and_count(server.address, 500)
    signalled_at = time.time()
    assert server.process.terminate() == 0
    checkpoints = complete_checkpoints(str(tmp_path / "run" / "replay_checkpoints"))
    assert len(checkpoints) == 1
    assert os.path.getmtime(os.path.join(checkpoints[0], "DONE")) >= signalled_at - 1
    restarted = replay_server_factory(*NO_LIMITER, port=server.port)
    assert reverb.Client(restarted.address).server_info(timeout=10)[REPLAY_TABLE].current_size == size


def test_F7_kill_during_checkpoint_keeps_the_previous_complete_one(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "0", "--replay-max-size", "400000")
    client = reverb.Client(server.address)
    first_size = fill_and_count(server.address, 2_000)
    client.checkpoint()
    fill_and_count(server.address, 60_000)  # large enough that the next checkpoint takes a while to write
    checkpoint_dir = tmp_path / "run" / "replay_checkpoints"
    threading.Thread(target=lambda: _ignore_errors(client.checkpoint), daemon=True).start()
    # Kill the moment the new checkpoint directory appears: Reverb creates it first and writes DONE last.
    deadline = time.monotonic() + 60
    while len([p for p in checkpoint_dir.iterdir() if p.is_dir()]) < 2:
        assert time.monotonic() < deadline, "no second checkpoint directory within 60 s"
        time.sleep(0.002)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(30)
    incomplete = [p for p in checkpoint_dir.iterdir() if p.is_dir() and not (p / "DONE").exists()]
    assert incomplete, "the kill came after the checkpoint completed; the test proved nothing"
    restarted = replay_server_factory(*NO_LIMITER, "--replay-max-size", "400000", port=server.port,
                                      root=tmp_path / "run")
    assert reverb.Client(restarted.address).server_info(timeout=10)[REPLAY_TABLE].current_size == first_size


def _ignore_errors(call):
    try:
        call()
    except Exception:  # noqa: BLE001 - the server is killed mid-call on purpose
        pass


def test_F8_corrupt_checkpoint_is_named_and_quarantine_recovers(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "0")
    fill_and_count(server.address, 300)
    assert server.process.terminate() == 0
    checkpoint_dir = tmp_path / "run" / "replay_checkpoints"
    (latest,) = complete_checkpoints(str(checkpoint_dir))
    chunks = os.path.join(latest, "chunks.tfrecord")
    data = bytearray(open(chunks, "rb").read())
    data[10:40] = os.urandom(30)
    open(chunks, "wb").write(bytes(data))

    failed = run_cli("replay-server", *NO_LIMITER, "--root-dir", str(tmp_path / "run"), "--port", str(server.port),
                     "--health-port", "0")
    assert failed.returncode == 1
    assert f"unreadable: {chunks}" in failed.stderr and "--on-corrupt-checkpoint quarantine" in failed.stderr
    assert os.path.exists(latest)  # fail mode never deletes or moves data

    recovered = replay_server_factory(*NO_LIMITER, "--on-corrupt-checkpoint", "quarantine", port=server.port,
                                      root=tmp_path / "run")
    assert reverb.Client(recovered.address).server_info(timeout=10)[REPLAY_TABLE].current_size == 0
    quarantined = list((tmp_path / "run" / "replay" / "quarantine").iterdir())
    assert len(quarantined) == 1 and (quarantined[0] / "chunks.tfrecord").exists()
    assert "quarantined it to" in recovered.process.log()


def test_F6_sigint_and_sigterm_both_checkpoint(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "0")
    os.kill(server.process.pid, signal.SIGINT)
    assert server.process.wait(60) == 0
    assert complete_checkpoints(str(tmp_path / "run" / "replay_checkpoints"))


def test_periodic_checkpoints_are_written(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "2")
    wait_until(lambda: "checkpoint (periodic) written" in server.process.log(), 30, "a periodic checkpoint")
    assert complete_checkpoints(str(tmp_path / "run" / "replay_checkpoints"))
