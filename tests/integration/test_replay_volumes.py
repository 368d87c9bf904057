"""The replay server in the shipped containers' file layout: a read-only root file system, a tmpfs /tmp, and two
writable volumes (replay checkpoints; the run root), set with the DQN_* variables docker-compose.yml gives it.

A mount namespace stands in for the container: the machine's root file system is re-mounted read-only in it, the
two volumes are bind mounts at /mnt/replay and /mnt/run (the compose file mounts them at /data/replay and
/data/run; /mnt is a read-only tmpfs here, as /data is part of the image's read-only root there), and the server
runs with every capability dropped and no new privileges. It runs as root without capabilities rather than as
uid 10001, because this machine's Python lives under /root. Needs root; fails, never skips, without it.
Also: a checkpoint directory that holds anything but the server's checkpoints is refused at start.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import reverb

from dqn.replay_layout.items import REPLAY_TABLE
from replay_server.recovery import complete_checkpoints
from tests.conftest import REPO, free_port, health_status, run_cli, wait_until
from tests.helpers import NO_LIMITER, fill_and_count

pytestmark = pytest.mark.integration

CONTAINER = """set -e
mount -t tmpfs -o size=1m tmpfs /mnt
mkdir /mnt/replay /mnt/run
mount --bind "$REPLAY_VOLUME" /mnt/replay
mount --bind "$RUN_VOLUME" /mnt/run
mount -o remount,ro /mnt
mount -o remount,bind,ro /
mount -t tmpfs -o size=256m tmpfs /tmp
exec setpriv --inh-caps=-all --bounding-set=-all --no-new-privs "$@"
"""


class ContainerLikeServer:
    """`dqn-service replay-server` in the container layout (see the module docstring); killed by its PID only."""

    def __init__(self, tmp_path, port: int, *flags: str, **env: str):
        self.port, self.health_port = port, free_port()
        self.log_path = tmp_path / f"replay-server-{port}-{len(list(tmp_path.glob('replay-server-*.log')))}.log"
        volumes = {"REPLAY_VOLUME": str(tmp_path / "replay-volume"), "RUN_VOLUME": str(tmp_path / "run-volume")}
        for path in volumes.values():
            os.makedirs(path, exist_ok=True)
        compose_env = {"DQN_ROOT_DIR": "/mnt/run", "DQN_CHECKPOINT_DIR": "/mnt/replay", "DQN_PORT": str(port),
                       "DQN_HEALTH_PORT": str(self.health_port), "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
                       "TF_CPP_MIN_LOG_LEVEL": "2", **env}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", CONTAINER, "sh", sys.executable,
                 "-m", "launcher", "replay-server", *flags],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, **volumes, **compose_env})

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_serving(self) -> None:
        wait_until(lambda: self.process.poll() is not None or health_status(self.health_port) == "SERVING", 120,
                   "the replay server SERVING")
        assert self.process.poll() is None, self.log()

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            raise


def test_quarantine_works_on_a_read_only_root_with_the_shipped_volumes(tmp_path):
    assert os.geteuid() == 0, "this test builds a mount namespace: it needs root"
    port = free_port()
    first = ContainerLikeServer(tmp_path, port, *NO_LIMITER, "--checkpoint-interval-s", "0")
    try:
        first.wait_serving()
        fill_and_count(f"localhost:{port}", 300)
    finally:
        assert first.stop() == 0, first.log()
    (latest,) = complete_checkpoints(str(tmp_path / "replay-volume"))
    chunks = os.path.join(latest, "chunks.tfrecord")
    data = bytearray(open(chunks, "rb").read())
    data[10:40] = os.urandom(30)
    open(chunks, "wb").write(bytes(data))

    recovered = ContainerLikeServer(tmp_path, port, *NO_LIMITER, DQN_ON_CORRUPT_CHECKPOINT="quarantine")
    try:
        recovered.wait_serving()
        assert reverb.Client(f"localhost:{port}").server_info(timeout=10)[REPLAY_TABLE].current_size == 0
        log = recovered.log()
        assert "quarantined it to /mnt/run/replay/quarantine/" in log and "Read-only file system" not in log, log
    finally:
        assert recovered.stop() == 0, recovered.log()
    (quarantined,) = (tmp_path / "run-volume" / "replay" / "quarantine").iterdir()
    assert quarantined.name.startswith(os.path.basename(latest)) and (quarantined / "chunks.tfrecord").exists()
    assert not os.path.exists(latest)
    assert complete_checkpoints(str(tmp_path / "replay-volume"))  # the fresh buffer's final checkpoint


@pytest.mark.parametrize("entry", ["lost+found", "notes.txt", "2026-01-01T00:00:00+00:00/extra.bin"])
def test_a_checkpoint_dir_with_other_entries_is_refused_at_start(tmp_path, entry):
    """What a volume's root (`lost+found`), a shared folder or a hand-edited checkpoint holds: Reverb would delete
    it at the first checkpoint, and a name that sorts after its own would make it delete that checkpoint."""
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "2026-01-01T00:00:00.5+00:00").mkdir(parents=True)  # a partial checkpoint of the server: fine
    path = checkpoints / entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir() if entry == "lost+found" else path.write_text("x")
    result = run_cli("replay-server", "--root-dir", str(tmp_path / "run"), "--checkpoint-dir", str(checkpoints),
                     "--port", str(free_port()))
    assert result.returncode == 2, result.stderr
    shown = entry.split("/")[0]
    assert (f"--checkpoint-dir / DQN_CHECKPOINT_DIR {checkpoints} holds entries that are not replay checkpoints: "
            f"{shown}.") in result.stderr, result.stderr
    assert f"e.g. {checkpoints}/checkpoints" in result.stderr and "Traceback" not in result.stderr
    assert path.exists()  # nothing was touched
