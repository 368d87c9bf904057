"""F11-F12 under `dqn-service local`: a flaky user env and dying roles are recovered; crash loops end the run; a
closed console does not orphan the roles."""

import re
import signal
import subprocess
import sys

import psutil
import pytest

from dqn.process.progress import read_progress
from tests.conftest import REPO, wait_until
from tests.events import read_scalars
from tests.helpers import FAST, LEARNER_FAST

pytestmark = pytest.mark.integration


def local(tmp_path, *flags):
    command = [sys.executable, "-m", "launcher", "local", "--root-dir", str(tmp_path / "run"), *FAST, *LEARNER_FAST,
               "--num-envs", "4", "--max-train-steps", "100000", *flags]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def role_process(launcher, name):
    """The running process of a role (roles are forked from the launcher's forkserver and named dqn-<role>)."""
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if child.name() == f"dqn-{name}"[:15] and child.status() != psutil.STATUS_ZOMBIE:
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def finish(launcher, timeout_s=180):
    try:
        output, _ = launcher.communicate(timeout=timeout_s)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return output


def test_F12_a_killed_role_is_restarted_and_a_crash_loop_ends_the_run(tmp_path):
    run = local(tmp_path, "--max-role-restarts", "1", "--target-return", "1e9")  # no early solve before the kills
    try:
        actor_log = tmp_path / "run" / "logs" / "actor-0.log"
        wait_until(lambda: role_process(run, "actor-0") is not None and read_progress(
            str(tmp_path / "run" / "actor-0")).get("env_steps", 0) > 0, 120, "actor-0 collecting")
        first = role_process(run, "actor-0")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        wait_until(lambda: (p := role_process(run, "actor-0")) is not None and p.pid != first.pid, 60,
                   "actor-0 restarted")
        steps_at_kill = read_progress(str(tmp_path / "run" / "actor-0")).get("env_steps", 0)
        # The restarted actor writes to the same log and collects again (its counters start over).
        wait_until(lambda: actor_log.read_text().count("envs of CartPole-v1") == 2, 60, "the second actor start")
        wait_until(lambda: read_progress(str(tmp_path / "run" / "actor-0")).get("env_steps", 0) not in
                   (0, steps_at_kill), 60, "the restarted actor-0 to collect")
        assert run.poll() is None, "the run ended after one restartable exit"
        role_process(run, "actor-0").send_signal(signal.SIGKILL)  # a second exit within the window: a crash loop
    except BaseException:
        run.kill()
        raise
    output = finish(run)
    assert run.returncode == 1, output
    assert "actor-0 exited -9; restarting it in 1 s" in output
    assert re.search(r"crashed: actor-0 exited -9 \(crash loop: 1 restart\(s\) within 300 s, max_role_restarts 1; "
                     r"log \S+actor-0\.log\)", output), output
    assert "role_restarts=1" in output


def test_F11_a_flaky_user_env_is_recreated_and_the_run_goes_on(tmp_path):
    run = local(tmp_path, "--env-id", "tests.flaky_env:FlakyCartPole-v0", "--max-wall-time-s", "25",
                "--target-return", "100000")
    output = finish(run)
    assert run.returncode == 0, output
    assert "max_wall_time_s (25 s) reached" in output
    restarts = int(re.search(r"env_restarts=(\d+)", output).group(1))
    assert restarts > 0, output
    assert "role_restarts=0" in output
    actor_log = (tmp_path / "run" / "logs" / "actor-0.log").read_text()
    assert "failed in step (EnvBug: simulated env bug" in actor_log and "Traceback" in actor_log
    scalars = read_scalars(tmp_path / "run" / "actor-0")
    assert max(value for _, value in scalars["actor/env_restarts"]) > 0
    learner = read_progress(str(tmp_path / "run" / "learner"))
    assert learner.get("train_step", 0) > 0
    # `dqn-service status --root-dir` shows each actor's restart count from its progress file (no server needed).
    status = subprocess.run([sys.executable, "-m", "launcher", "status", "--replay-address", "localhost:1",
                             "--timeout", "1", "--root-dir", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=60)
    shown = re.search(r"^actor-0 .*env restarts (\d+)", status.stdout, re.M)
    assert shown and int(shown.group(1)) > 0, status.stdout


def test_F11_an_env_that_never_resets_ends_the_run_with_one_clear_line(tmp_path):
    run = local(tmp_path, "--env-id", "tests.flaky_env:BrokenCartPole-v0", "--max-role-restarts", "1")
    output = finish(run)
    assert run.returncode == 1, output
    assert re.search(r"crashed: (actor-\d|evaluator) exited 1 \(crash loop", output), output
    actor_log = (tmp_path / "run" / "logs" / "actor-0.log").read_text()
    assert ("dqn-service actor: error: env 'tests.flaky_env:BrokenCartPole-v0' (sub-env 0) failed at reset 3 "
            "times in a row") in actor_log, actor_log


def test_a_closed_console_does_not_leave_the_roles_running(tmp_path):
    """The console of `local` is a pipe whose reader goes away (a wrapper script killed): the run still ends on
    time, stops every role and checkpoints the replay, and the launcher exits."""
    run = local(tmp_path, "--max-wall-time-s", "25", "--target-return", "1e9")
    try:
        while not run.stdout.readline().startswith("dqn-service local:"):  # the start line: it is supervising
            pass
        run.stdout.close()  # nobody reads the progress lines from now on: the next one meets a broken pipe
        names = ("replay-server", "learner", "actor-0", "evaluator")
        wait_until(lambda: all(role_process(run, name) for name in names), 60, "every role running")
        roles = [role_process(run, name) for name in names]
        assert run.wait(timeout=150) == 0
        psutil.wait_procs(roles, timeout=10)
        assert not [role.pid for role in roles if role.is_running() and role.status() != psutil.STATUS_ZOMBIE]
        assert (tmp_path / "run" / "logs" / "replay-server.log").read_text().count("final checkpoint") >= 1
    finally:
        if run.poll() is None:
            run.kill()
