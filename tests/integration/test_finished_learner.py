"""A learner at max_train_steps checkpoints, publishes and stays up idle saying "done" (every shipped restart policy
would restart one that exits, for ever); `local` still ends its run when training is done."""

import re
import subprocess
import sys
import time

import pytest

from dqn.remote.weights_puller import fetch_weights
from tests.conftest import REPO, free_port, health_status, run_cli, wait_until
from tests.helpers import FAST, LEARNER_FAST

pytestmark = pytest.mark.integration

DONE = ("--max-train-steps", "300")


def test_a_finished_learner_stays_up_idle_serving_and_says_done(system_factory):
    system = system_factory()
    health_port = free_port()
    # A short stall deadline: idling is the finished learner's loop, so its health must stay SERVING past it.
    learner = system.start_learner(*DONE, "--health-port", str(health_port), "--health-stall-timeout-s", "2")
    system.start_actor(0)
    wait_until(lambda: system.progress("learner").get("finished"), 180, "the learner to finish")
    progress = system.progress("learner")
    assert progress["train_step"] >= 300 and progress["status"].startswith("done"), progress
    time.sleep(5)  # an exit would come at once; a stalled health after 2 s
    assert learner.alive(), learner.log()
    assert health_status(health_port) == "SERVING"
    assert fetch_weights(system.server.address, 30.0).train_step == progress["train_step"]
    assert "checkpoint at train step " + str(progress["train_step"]) in learner.log()
    status = run_cli("status", "--replay-address", system.server.address, "--root-dir", str(system.root),
                     "--health", f"learner=localhost:{health_port}")
    assert status.returncode == 0, status.stderr
    assert f"train step {progress['train_step']}" in status.stdout and "status done: max_train_steps 300" in \
        status.stdout, status.stdout
    assert learner.terminate() == 0  # stopped from idle: a clean exit

    # What a restart policy does after a host reboot: the restarted learner restores the final step, publishes
    # and goes straight back to idle.
    restarted = system.start_learner(*DONE)
    wait_until(lambda: "staying up idle until stopped" in restarted.log(), 120, "the restarted learner to idle")
    assert f"learner starting at train step {progress['train_step']} " in restarted.log()
    time.sleep(3)
    assert restarted.alive() and system.progress("learner")["finished"] is True
    assert restarted.terminate() == 0


def test_local_ends_its_run_when_the_learner_is_done(tmp_path):
    command = [sys.executable, "-m", "launcher", "local", "--root-dir", str(tmp_path / "run"), *FAST, *LEARNER_FAST,
               "--num-envs", "4", "--num-actors", "1", "--max-train-steps", "300", "--eval-interval", "100",
               "--eval-episodes", "2", "--eval-confirm-episodes", "0", "--target-return", "1e9", "--max-wall-time-s",
               "400"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "max_train_steps reached at" in output, output
    assert "exit codes: replay-server=0, learner=0, actor-0=0, evaluator=0" in output, output
    learner_log = (tmp_path / "run" / "logs" / "learner.log").read_text()
    assert "staying up idle until stopped" in learner_log and "stopping (SIGTERM)" in learner_log

    # The same run dir started with a network its checkpoints do not fit: the run ends (the earlier run's finished
    # learner ends nothing), and its console repeats the refusal of the role that found it, naming the setting (the
    # replay server, whose checkpoint holds the last weights, refuses first; the learner too, if it gets there).
    other = subprocess.run([*command, "--layer-norm", "true"], capture_output=True, text=True, cwd=REPO, timeout=300)
    output = other.stdout + other.stderr
    assert other.returncode == 1, output
    assert "max_train_steps reached" not in output, output
    assert re.search(r"crashed: (replay-server|learner) exited 2 \(bad input: a restart would fail the same way: ",
                     output), output
    assert "layer_norm (then False, now True)" in output, output
