"""F14: a full disk under the replay server: checkpoints fail, the server keeps serving its buffer and recovers."""

import os
import signal

import pytest
import reverb

from dqn.process.health import check
from dqn.process.progress import read_progress
from dqn.replay_layout.items import REPLAY_TABLE
from replay_server.recovery import complete_checkpoints
from tests.conftest import run_cli, wait_until
from tests.events import read_scalars
from tests.fs import fill, small_filesystem
from tests.helpers import NO_LIMITER, fill_and_count

pytestmark = pytest.mark.integration


def test_F14_full_disk_keeps_the_replay_buffer_served_and_checkpoints_resume(replay_server_factory, tmp_path):
    with small_filesystem(tmp_path / "disk") as disk:
        root = disk / "run"
        server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "3", root=root)
        fill_and_count(server.address, 1_000)
        wait_until(lambda: "checkpoint (periodic) written" in server.process.log(), 30, "a periodic checkpoint")
        filler = fill(disk, leave_bytes=16 * 1024)
        size = fill_and_count(server.address, 4_000)  # more than the free space compressed
        wait_until(lambda: "replay checkpoint (periodic) failed" in server.process.log(), 30, "a failed checkpoint")
        log = server.process.log()
        checkpoint_dir = str(root / "replay_checkpoints")
        assert "No space left on device" in log and f"free in {checkpoint_dir}" in log
        assert "Retrying in 3 s" in log and "Traceback" not in log
        assert server.process.alive()
        assert reverb.Client(server.address).server_info(timeout=10)[REPLAY_TABLE].current_size == size
        health = f"localhost:{server.health_port}"
        assert check(health) == "SERVING" and check(health, service="checkpoints") == "NOT_SERVING"
        status = run_cli("status", "--replay-address", server.address, "--health", f"replay={health}")
        assert "checkpoint writes failing" in status.stdout, status.stdout

        filler.unlink()  # space comes back: the next interval writes a checkpoint again
        wait_until(lambda: "replay checkpoints work again" in server.process.log(), 30, "a checkpoint after the fault")
        assert check(health, service="checkpoints") == "SERVING"
        assert all(os.path.exists(os.path.join(p, "DONE")) or p == max(os.listdir(checkpoint_dir))
                   for p in os.listdir(checkpoint_dir))
        assert read_progress(str(root / "replay"))["checkpoint_failures"] >= 1
        assert max(value for _, value in read_scalars(root / "replay")["replay/checkpoint_failures"]) >= 1
        os.kill(server.process.pid, signal.SIGTERM)
        assert server.process.process.wait(60) == 0
        restarted = replay_server_factory(*NO_LIMITER, port=server.port, root=root)
        assert reverb.Client(restarted.address).server_info(timeout=10)[REPLAY_TABLE].current_size == size
        os.kill(restarted.process.pid, signal.SIGTERM)
        restarted.process.process.wait(60)
        assert complete_checkpoints(checkpoint_dir)


def test_F14_final_checkpoint_on_a_full_disk_exits_1_with_one_clear_line(replay_server_factory, tmp_path):
    with small_filesystem(tmp_path / "disk") as disk:
        server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "0", root=disk / "run")
        fill(disk, leave_bytes=8 * 1024)
        fill_and_count(server.address, 2_000)
        os.kill(server.process.pid, signal.SIGTERM)
        assert server.process.process.wait(60) == 1
        log = server.process.log()
        assert "replay checkpoint (final) failed" in log and "stopped without a final checkpoint" in log
        assert "Traceback" not in log
        assert not [p for p in (disk / "run" / "replay_checkpoints").iterdir() if not (p / "DONE").exists()]
