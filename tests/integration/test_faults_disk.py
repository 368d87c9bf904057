"""F14: a full disk under the replay server: checkpoints fail, the server keeps serving its buffer and recovers;
and under a whole local run: no role stops."""

import os
import signal
import subprocess
import sys
import time

import pytest
import reverb

from dqn.process.health import check
from dqn.process.progress import read_progress
from dqn.replay_layout.items import REPLAY_TABLE
from replay_server.recovery import complete_checkpoints
from tests.conftest import REPO, run_cli, wait_until
from tests.events import read_scalars
from tests.fs import fill, small_filesystem
from tests.helpers import FAST, LEARNER_FAST, NO_LIMITER, fill_and_count
from tests.integration.test_faults_local import role_process

ROLES = ("replay-server", "learner", "actor-0", "actor-1", "evaluator")

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
        assert server.process.wait(60) == 0
        restarted = replay_server_factory(*NO_LIMITER, port=server.port, root=root)
        assert reverb.Client(restarted.address).server_info(timeout=10)[REPLAY_TABLE].current_size == size
        os.kill(restarted.process.pid, signal.SIGTERM)
        restarted.process.wait(60)
        assert complete_checkpoints(checkpoint_dir)


def test_F14_final_checkpoint_on_a_full_disk_exits_1_with_one_clear_line(replay_server_factory, tmp_path):
    with small_filesystem(tmp_path / "disk") as disk:
        server = replay_server_factory(*NO_LIMITER, "--checkpoint-interval-s", "0", root=disk / "run")
        fill(disk, leave_bytes=8 * 1024)
        fill_and_count(server.address, 2_000)
        os.kill(server.process.pid, signal.SIGTERM)
        assert server.process.wait(60) == 1
        log = server.process.log()
        assert "replay checkpoint (final) failed" in log and "stopped without a final checkpoint" in log
        assert "Traceback" not in log
        assert not [p for p in (disk / "run" / "replay_checkpoints").iterdir() if not (p / "DONE").exists()]


#: How long the run root stays full: three checkpoint intervals (5 s) and fifteen summary intervals (1 s).
FULL_S = 15


def test_F14_every_role_of_a_local_run_survives_a_full_run_root(tmp_path):
    """`dqn-service local` with its whole run root on a small file system that then fills up: no role exits (the
    actors' progress files, the evaluator's results and best weights, every summary and checkpoint fail), the run
    goes on; once there is room again every role writes again. A results line torn before the evaluator cut
    torn lines back off (written here by hand) costs the launcher that line only."""
    with small_filesystem(tmp_path / "disk", size="96m") as disk:
        root = disk / "run"
        run = subprocess.Popen(
            [sys.executable, "-m", "launcher", "local", "--root-dir", str(root), *FAST, *LEARNER_FAST,
             "--num-envs", "4", "--max-train-steps", "100000", "--target-return", "100000", "--eval-interval", "50",
             "--eval-episodes", "2", "--checkpoint-interval-s", "5", "--checkpoint-interval", "200",
             "--summary-interval", "25", "--summary-interval-s", "1", "--max-role-restarts", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        try:
            evals = root / "evaluator" / "evals.jsonl"
            wait_until(lambda: run.poll() is not None or (evals.exists() and evals.read_text().count("\n") >= 2),
                       240, "training and two evaluations")
            assert run.poll() is None, run.communicate()[0]
            roles = {name: role_process(run, name).pid for name in ROLES}
            with open(evals, "a") as handle:
                handle.write('{"train_step": 1, "average_re')  # what an evaluator without the cut-back left
            before = {name: read_progress(str(root / name)) for name in ("learner", "actor-0", "actor-1")}
            filler = fill(disk)
            full_since = time.monotonic()
            time.sleep(FULL_S)
            assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize < 64 * 1024
            assert {name: getattr(role_process(run, name), "pid", None) for name in ROLES} == roles
            assert run.poll() is None
            filler.unlink()
            print(f"\nrun root full for {time.monotonic() - full_since:.0f} s")
            for name in ("learner", "actor-0", "actor-1"):
                wait_until(lambda n=name: read_progress(str(root / n)).get("time", 0) > before[n]["time"] + FULL_S, 60,
                           f"{name} to write its progress again")
            assert read_progress(str(root / "learner"))["train_step"] > before["learner"]["train_step"]
            assert read_progress(str(root / "actor-0"))["env_steps"] > before["actor-0"]["env_steps"]
            lines = evals.read_text().count("\n")
            wait_until(lambda: evals.read_text().count("\n") > lines, 120, "a new evaluation after the disk filled")
            assert {name: role_process(run, name).pid for name in ROLES} == roles
        finally:
            if run.poll() is None:
                run.send_signal(signal.SIGTERM)
            output = run.communicate(timeout=300)[0]
        assert run.returncode == 0, output
        assert "role_restarts=0" in output and "restarting it" not in output, output
        assert "skipped the torn start of a line" in output, output
        logs = {name: (root / "logs" / f"{name}.log").read_text() for name in ROLES}
        tracebacks = {name: text[max(0, text.index("Traceback") - 800):text.index("Traceback") + 4000]
                      for name, text in logs.items() if "Traceback" in text}
        assert not tracebacks, "\n\n".join(f"--- {name} ---\n{text}" for name, text in tracebacks.items())
