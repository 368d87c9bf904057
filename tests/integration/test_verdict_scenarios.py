"""The bottleneck verdict on real runs: each scenario injects one limit and the verdict must name it within 60 s.

Two kinds of injection keep the suite short. One run of separate role processes (two actors on a host of their
own, behind a link the test can slow either way) takes five live injections in turn: nothing (balanced), a replay
server under a CPU quota of 0.05 cores, a slow link from the actors to the replay server, weights that outgrow the
link to the actors, an evaluator that hogs a core. Two `dqn-service local` runs (roles forked from one process
start in seconds) are configured into a limit: a high replay ratio, a slow env. A wrong verdict fails the test
with every verdict it saw.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dqn.bottleneck.verdict import PARTS
from tests.conftest import REPO, RoleProcess, free_port, health_status, run_cli, stop_all, wait_until
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


def judged(watcher: VerdictWatcher, part: str, what: str, record: str, reads: int = 1) -> dict:
    """The verdict naming `part` within WITHIN_S, in `reads` reads in a row (recorded for the unit tests on
    request); prints its line."""
    took, verdict = watcher.wait_for(part, WITHIN_S, what, reads)
    print(f"{what}: after {took:.0f} s: {verdict['line']}", flush=True)
    record_observation(record, verdict)
    return verdict


def test_live_injections_name_each_part_in_turn(tmp_path: Path):
    """Balanced, then a starved replay server, a slow link from the actors, weights that outgrow the link to them and
    an evaluator hogging a core: each is named within WITHIN_S of its injection.

    The default network (256, 256: 0.28 MB of weights) and two actors of 4 envs on a host of their own, which
    together make about what the learner takes at the default replay ratio.
    """
    far = FarHost()
    roles: list[RoleProcess] = []
    quota = None
    try:
        port, health = free_port(), free_port()
        common = ["--root-dir", str(tmp_path / "run"), "--replay-min-size", "200", "--envs-per-item", "4"]
        # Fresh interpreters in this test's session, like the far roles: the verdicts weigh the near roles' share of
        # the cores against the far actors', and a forked role gets a session, so a scheduler group, of its own.
        server = RoleProcess(["replay-server", *common, "--port", str(port), "--health-port", str(health)],
                             tmp_path / "replay-server.log", fork=False)
        roles.append(server)
        wait_until(lambda: not server.alive() or health_status(health) == "SERVING", 120, "replay server SERVING")
        assert server.alive(), server.log()
        near = ["--replay-address", f"localhost:{port}", *common]
        roles.append(RoleProcess(["learner", *near, "--batch-size", "64", "--max-train-steps", "10000000"],
                                 tmp_path / "learner.log", fork=False))
        for actor_id in range(2):
            roles.append(FarRole(far.prefix(), ["actor", *far.role_flags(), "--replay-address",
                                                f"{far.near_address}:{port}", *common, "--actor-id", str(actor_id),
                                                "--num-envs", "4", "--warmup-steps", "200"],
                                 tmp_path / f"actor-{actor_id}.log"))
        # The evaluator that will hog a core: built now, stopped until its turn (a process start takes most of a
        # minute on a busy machine), then given a whole core however busy the machine is.
        hog = RoleProcess(["evaluator", *near, "--eval-interval", "1", "--eval-episodes", "1000",
                           "--eval-confirm-episodes", "0"], tmp_path / "evaluator.log", fork=False)
        roles.append(hog)
        wait_until(lambda: "evaluation episodes:" in hog.log() or not hog.alive(), START_S, "the evaluator built")
        os.kill(hog.pid, signal.SIGSTOP)
        watcher = VerdictWatcher(f"localhost:{port}")
        watcher.wait_until_judging(START_S)
        judged(watcher, "balanced", "healthy CartPole run", "balanced", reads=5)  # balanced for 8 s on end
        status = run_cli("status", "--replay-address", f"localhost:{port}", timeout_s=120)
        print(status.stdout)
        assert "bottleneck (last 10 s" in status.stdout and "  capacity: ≈" in status.stdout, status.stdout

        quota = CpuQuota(0.05)
        quota.add(server.pid)
        judged(watcher, "replay server", "replay server under a 0.05-core CPU quota", "replay_server")
        quota.close()
        quota = None

        far.slow("300kbit")
        judged(watcher, "replay link", "actors' writes to the replay server shaped to 300 kbit/s", "replay_link")
        far.unslow()

        far.slow_inbound("2mbit")
        judged(watcher, "weight transfer", "0.28 MB weights pulled by 2 actors over 2 Mbit/s", "weight_transfer")
        far.unslow()

        for task in os.listdir(f"/proc/{hog.pid}/task"):  # every thread: Linux keeps a nice value per thread
            os.setpriority(os.PRIO_PROCESS, int(task), -15)
        os.kill(hog.pid, signal.SIGCONT)
        judged(watcher, "evaluator", "evaluator hogging a core", "evaluator")
        for role in roles:
            assert role.alive(), f"{role.command[0]} died:\n{role.log()[-3000:]}"
    finally:
        if quota is not None:
            quota.close()
        for role in roles:
            if role.alive():
                os.kill(role.pid, signal.SIGCONT)  # a stopped process would not stop on SIGTERM
        stop_all(roles, grace_s=30)
        far.close()


def run_local(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, Path]:
    """`dqn-service local` with FAST settings and `flags`, its output in a file: (process, output).

    An unreachable target return: a run that solves CartPole stops before the verdict can be judged.
    """
    output = tmp_path / "local.out"
    with open(output, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "launcher", "local", "--root-dir", str(tmp_path / "run"),
                                    *FAST, "--batch-size", "64", "--num-envs", "4", "--warmup-steps", "200",
                                    "--max-wall-time-s", "400", "--target-return", "1e9", *flags],
                                   stdout=handle, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    wait_until(lambda: "replay at" in output.read_text(errors="replace") or process.poll() is not None, 120,
               "local's first line")
    assert process.poll() is None, output.read_text(errors="replace")
    return process, output


def local_scenario(tmp_path: Path, part: str, what: str, record: str, *flags: str) -> None:
    """A local run configured into a limit: the verdict names `part`, and so does local's own display."""
    process, output = run_local(tmp_path, *flags)
    try:
        # local's roles listen in a network namespace of their own: the verdict is read from the replay server's copy
        watcher = VerdictWatcher(root_dir=tmp_path / "run")
        watcher.wait_until_judging(START_S)
        judged(watcher, part, what, record)
        wait_until(lambda: f"bottleneck: {part}:" in output.read_text(errors="replace"), 30,
                   "local's display of the verdict")
        status = run_cli("status", "--root-dir", str(tmp_path / "run"), timeout_s=60)
        assert f"): {part}: " in status.stdout and "  capacity: ≈" in status.stdout, status.stdout
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
    print(output.read_text(errors="replace")[-1500:])
    lines, parts = verdict_summaries(tmp_path / "run" / "replay")
    assert any(line.startswith(f"{part}: ") for line in lines), lines
    assert PARTS.index(part) in parts, parts


def verdict_summaries(directory: Path) -> tuple[list[str], set[int]]:
    """(the verdict/line texts, the verdict/part values) the replay server wrote to TensorBoard."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    lines, parts = [], set()
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            for value in event_pb2.Event.FromString(record.numpy()).summary.value:
                if value.tag == "verdict/line":
                    lines.append(tf.make_ndarray(value.tensor).item().decode())
                elif value.tag == "verdict/part":
                    parts.add(int(tf.make_ndarray(value.tensor)))
    return lines, parts


def test_high_replay_ratio_names_the_learner(tmp_path: Path):
    local_scenario(tmp_path, "learner", "replay ratio 32", "learner", "--num-actors", "1",
                   "--samples-per-insert", "32")


def test_slow_env_names_the_actors_envs(tmp_path: Path):
    local_scenario(tmp_path, "actors' envs", "env steps 2 ms slower", "actors_envs", "--num-actors", "1",
                   "--env-id", "tests.user_envs:SlowCartPole-v0", "--samples-per-insert", "4")
