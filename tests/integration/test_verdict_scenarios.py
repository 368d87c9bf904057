"""The bottleneck verdict on real runs: each scenario injects one limit and the verdict must name it within 60 s.

Two kinds of injection keep the suite short. One run of separate role processes (an actor on a host of its own
behind a link the test can slow) takes four live injections in turn: nothing (balanced), a replay server under a
CPU quota of 0.05 cores, a slow link from the actor to the replay server, an evaluator that hogs a core. Three
`dqn-service local` runs (roles forked from one process start in seconds) are configured into a limit: a high
replay ratio, a slow env, a large network with many actors pulling weights. A wrong verdict fails the test with
every verdict it saw.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, RoleProcess, free_port, health_status, stop_all, wait_until
from tests.verdict_bed import CpuQuota, FarHost, VerdictWatcher, record_observation

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

#: The verdict must name an injected limit this soon after the injection (or after the run's first judged verdict).
WITHIN_S = 60.0
#: Starting roles on a busy 2-core machine takes most of a minute before anything is judged.
START_S = 240.0
#: Quick settings shared by every scenario: a small network and replay warm-up, 4-env items, a batch of 64.
FAST = ["--replay-min-size", "200", "--fc-layer-params", "32", "--envs-per-item", "4"]


class FarRole(RoleProcess):
    """A `python -m launcher <command>` on the far host (`ip netns exec` execs: the PID is the role's)."""

    def __init__(self, prefix: list[str], command: list[str], log_path: Path):
        self.command, self.log_path = command, log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([*prefix, sys.executable, "-m", "launcher", *command], stdout=self._log,
                                        stderr=subprocess.STDOUT, cwd=REPO,
                                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        self.pid = self.process.pid


def judged(watcher: VerdictWatcher, part: str, what: str, record: str) -> dict:
    """The verdict naming `part` within WITHIN_S (recorded for the unit tests on request); prints its line."""
    took, verdict = watcher.wait_for(part, WITHIN_S, what)
    print(f"{what}: after {took:.0f} s: {verdict['line']}", flush=True)
    record_observation(record, verdict)
    return verdict


def test_live_injections_name_the_replay_server_the_link_and_the_evaluator(tmp_path: Path):
    """Balanced, then a starved replay server, a slow actor link and an evaluator hogging a core, each named."""
    far = FarHost()
    roles: list[RoleProcess] = []
    quota = None
    try:
        port, health = free_port(), free_port()
        root = tmp_path / "run"
        common = ["--root-dir", str(root), *FAST]
        server = RoleProcess(["replay-server", *common, "--port", str(port), "--health-port", str(health)],
                             tmp_path / "replay-server.log")
        roles.append(server)
        wait_until(lambda: not server.alive() or health_status(health) == "SERVING", 120, "replay server SERVING")
        assert server.alive(), server.log()
        local = ["--replay-address", f"localhost:{port}", *common]
        roles.append(RoleProcess(["learner", *local, "--batch-size", "64", "--max-train-steps", "10000000"],
                                 tmp_path / "learner.log"))
        roles.append(FarRole(far.prefix(), ["actor", "--replay-address", f"{far.near_address}:{port}", *common,
                                            "--num-envs", "12", "--warmup-steps", "200"], tmp_path / "actor.log"))
        evaluator = RoleProcess(["evaluator", *local, "--eval-interval", "500"], tmp_path / "evaluator.log")
        roles.append(evaluator)
        watcher = VerdictWatcher(f"localhost:{port}")
        watcher.wait_until_judging(START_S)
        judged(watcher, "balanced", "healthy CartPole run", "balanced")

        quota = CpuQuota(0.05)
        quota.add(server.pid)
        judged(watcher, "replay server", "replay server under a 0.05-core CPU quota", "replay_server")
        quota.close()
        quota = None

        far.slow("300kbit")
        judged(watcher, "replay link", "actor's link to the replay server shaped to 300 kbit/s", "replay_link")
        far.unslow()

        evaluator.terminate()
        hog = RoleProcess(["evaluator", *local, "--eval-interval", "1", "--eval-episodes", "1000",
                           "--eval-confirm-episodes", "0"], tmp_path / "evaluator-hog.log")
        roles.append(hog)
        os.setpriority(os.PRIO_PROCESS, hog.pid, -10)  # it takes a whole core, however busy the machine is
        judged(watcher, "evaluator", "evaluator hogging a core", "evaluator")
        for role in roles:
            assert role is evaluator or role.alive(), f"{role.command[0]} died:\n{role.log()[-3000:]}"
    finally:
        if quota is not None:
            quota.close()
        stop_all(roles, grace_s=30)
        far.close()


def run_local(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, Path, str]:
    """`dqn-service local` with FAST settings and `flags`, its output in a file: (process, output, replay address)."""
    output = tmp_path / "local.out"
    with open(output, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "launcher", "local", "--root-dir", str(tmp_path / "run"),
                                    *FAST, "--batch-size", "64", "--num-envs", "4", "--warmup-steps", "200",
                                    "--max-wall-time-s", "400", *flags],
                                   stdout=handle, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    found: list[str] = []

    def address() -> bool:
        found[:] = re.findall(r"replay at (localhost:\d+)", output.read_text(errors="replace"))
        return bool(found) or process.poll() is not None

    wait_until(address, 120, "local's first line")
    assert found, output.read_text(errors="replace")
    return process, output, found[0]


def local_scenario(tmp_path: Path, part: str, what: str, record: str, *flags: str) -> None:
    """A local run configured into a limit: the verdict names `part`, and so does local's own display."""
    process, output, address = run_local(tmp_path, *flags)
    try:
        watcher = VerdictWatcher(address)
        watcher.wait_until_judging(START_S)
        verdict = judged(watcher, part, what, record)
        wait_until(lambda: f"bottleneck: {part}:" in output.read_text(errors="replace"), 30,
                   "local's display of the verdict")
        assert verdict["part"] == part
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
    print(output.read_text(errors="replace")[-1500:])


def test_high_replay_ratio_names_the_learner(tmp_path: Path):
    local_scenario(tmp_path, "learner", "replay ratio 32", "learner", "--num-actors", "1",
                   "--samples-per-insert", "32")


def test_slow_env_names_the_actors_envs(tmp_path: Path):
    local_scenario(tmp_path, "actors' envs", "env steps 2 ms slower", "actors_envs", "--num-actors", "1",
                   "--env-id", "tests.user_envs:SlowCartPole-v0", "--samples-per-insert", "4")


def test_large_network_pulled_by_many_actors_names_the_weight_transfer(tmp_path: Path):
    local_scenario(tmp_path, "weight transfer", "4 MB of weights, published every step, 3 actors", "weight_transfer",
                   "--num-actors", "3", "--fc-layer-params", "1024,1024", "--samples-per-insert", "0",
                   "--batch-size", "16", "--publish-interval", "1", "--weights-refresh-interval-s", "0.05")
