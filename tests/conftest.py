"""Shared fixtures: free loopback ports, real role processes, bounded waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import portpicker
import pytest

from tests.role_fork import TestRole, kill_leftovers

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _no_role_outlives_the_tests() -> Iterator[None]:
    """Forked roles a test left running are killed at the end (multiprocessing would wait for them at exit)."""
    yield
    kill_leftovers()


def free_port() -> int:
    """An unused TCP port on this machine."""
    return portpicker.pick_unused_port()


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.2) -> None:
    """Polls `predicate` until true; fails the test naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class RoleStillRunning(subprocess.TimeoutExpired):
    """A role that did not exit in time; its message carries the end of the role's log, which says where it was."""

    def __str__(self) -> str:
        return f"{super().__str__()}; the end of its log:\n{self.output}"


class RoleProcess:
    """A `dqn-service <role>` process whose output goes to a log file; killed by its own PID only.

    Forked from the tests' forkserver (tests/role_fork.py), as `local` starts its roles: the same entry, argv, log,
    session and exit code as `python -m launcher <role>`, without each role importing the ML stack again.
    """

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str] | None = None, fork: bool = True):
        self.command = command
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
        if fork:
            self.process = TestRole(command[0], command, str(log_path), full_env, str(REPO))
        else:  # a fresh interpreter in this session (a test that weighs roles' CPU shares against this session's)
            self.process = subprocess.Popen([sys.executable, "-m", "launcher", *command], stdout=self._log,
                                            stderr=subprocess.STDOUT, env=full_env, cwd=REPO)
        self.pid = self.process.pid

    def log(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        """True while the process runs."""
        return self.process.poll() is None

    def wait(self, timeout_s: float) -> int:
        """Waits for the exit and returns its code; a timeout's error ends with the role's last log lines."""
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired as error:
            raise RoleStillRunning(error.cmd, error.timeout, output=self.log()[-4000:]) from None

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
        try:
            return self.wait(timeout_s)
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL by PID (no cleanup in the process)."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        """Best-effort cleanup at test end."""
        if self.alive():
            try:
                self.terminate(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


def _spawner(log_dir: Path) -> Iterator[Callable[..., RoleProcess]]:
    """Yields a function that starts role processes logging under `log_dir`; stops them all afterwards."""
    started: list[RoleProcess] = []

    def _spawn(*command: str, env: dict[str, str] | None = None, name: str | None = None) -> RoleProcess:
        role = RoleProcess(list(command), log_dir / f"{name or command[0]}-{len(started)}.log", env)
        started.append(role)
        return role

    yield _spawn
    stop_all(started)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., RoleProcess]]:
    """Starts role processes; every one is stopped when the test ends."""
    yield from _spawner(tmp_path)


@pytest.fixture(scope="module")
def module_spawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RoleProcess]]:
    """`spawn` for a role that serves several tests of one module: stopped after the module's last test."""
    yield from _spawner(tmp_path_factory.mktemp("module-roles"))


def stop_all(roles: list[RoleProcess], grace_s: float = 45.0) -> None:
    """SIGTERM clients together, then the replay servers (as an operator would); SIGKILL what outlives the grace."""
    clients = [r for r in roles if r.command[0] != "replay-server"]
    servers = [r for r in roles if r.command[0] == "replay-server"]
    for group in (clients, servers):
        for role in group:
            if role.alive():
                os.kill(role.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for role in group:
            try:
                role.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                role.kill()
            role._log.close()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """Runs `dqn-service ARGS` to completion and captures its output."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True, text=True,
                          env=full_env, cwd=REPO, timeout=timeout_s)


def health_status(port: int) -> str:
    """grpc.health.v1 status of a local endpoint."""
    from dqn.process.health import check

    return check(f"localhost:{port}", timeout_s=2.0)


class ReplayServer:
    """Handle on a replay-server process: ports, root dir, the process."""

    def __init__(self, spawn: Callable[..., RoleProcess], root: Path, *extra: str, port: int | None = None):
        self.port = port or free_port()
        self.health_port = free_port()
        self.root = root
        self.address = f"localhost:{self.port}"
        self.process = spawn("replay-server", "--root-dir", str(root), "--port", str(self.port),
                             "--health-port", str(self.health_port), *extra, name="replay-server")
        wait_until(lambda: not self.process.alive() or health_status(self.health_port) == "SERVING", 90,
                   "replay server health SERVING")
        assert self.process.alive(), self.process.log()


def emptied(server: ReplayServer, *tables: str) -> ReplayServer:
    """A running server with these tables emptied (their items and rate limiter reset): what a test that only writes
    to a table and reads it back sees on a fresh server, without the seconds a server takes to start."""
    import reverb

    assert server.process.alive(), server.process.log()[-3000:]
    client = reverb.Client(server.address)
    for table in tables:
        client.reset(table)
        assert client.server_info(timeout=10)[table].current_size == 0, table
    return server


@pytest.fixture
def replay_server_factory(spawn: Callable[..., RoleProcess], tmp_path: Path) -> Callable[..., ReplayServer]:
    """Starts replay servers (real Reverb, free ports) under tmp_path/run unless told otherwise."""

    def _start(*extra: str, root: Path | None = None, port: int | None = None) -> ReplayServer:
        return ReplayServer(spawn, root or tmp_path / "run", *extra, port=port)

    return _start


#: Small, fast settings shared by the multi-process tests.
#: Block items of 4 envs: the default layout (blocks), sized for the tests' 4-env actors.
FAST_FLAGS = ("--replay-min-size", "200", "--fc-layer-params", "32", "--envs-per-item", "4")


class System:
    """Replay server + learner + actors + evaluator as real processes under one run dir."""

    def __init__(self, spawn: Callable[..., RoleProcess], replay_server_factory: Callable[..., ReplayServer],
                 root: Path, *server_flags: str):
        self.spawn = spawn
        self.factory = replay_server_factory
        self.root = root
        self.server_flags = (*FAST_FLAGS, *server_flags)
        self.server = replay_server_factory(*self.server_flags, root=root)
        self.roles: dict[str, RoleProcess] = {}
        self.shared_flags: tuple[str, ...] = ()  # data-shaping flags every client role must share with the server

    def common(self) -> list[str]:
        return ["--root-dir", str(self.root), "--replay-address", self.server.address, *FAST_FLAGS,
                *self.shared_flags]

    def start_learner(self, *flags: str, env: dict[str, str] | None = None) -> RoleProcess:
        self.roles["learner"] = self.spawn(
            # Batch 64: the default 256 needs 64 inserts per SGD step, slow for 4-env test actors.
            "learner", *self.common(), "--batch-size", "64", "--max-train-steps", "1000000", "--publish-interval", "25",
            "--summary-interval", "25", "--checkpoint-interval", "200", "--no-data-timeout-s", "3", *flags,
            name="learner", env=env)
        return self.roles["learner"]

    def start_actor(self, actor_id: int, *flags: str, env: dict[str, str] | None = None) -> RoleProcess:
        name = f"actor-{actor_id}"
        self.roles[name] = self.spawn(
            "actor", *self.common(), "--actor-id", str(actor_id), "--num-envs", "4", "--warmup-steps", "200",
            "--summary-interval-s", "1", "--weights-refresh-interval", "40", *flags, name=name, env=env)
        return self.roles[name]

    def start_evaluator(self, *flags: str) -> RoleProcess:
        self.roles["evaluator"] = self.spawn(
            "evaluator", *self.common(), "--eval-interval", "50", "--eval-episodes", "3", "--poll-interval-s", "0.5",
            *flags, name="evaluator")
        return self.roles["evaluator"]

    def restart_server(self) -> ReplayServer:
        """Restarts the replay server on the same port and root (restoring its checkpoint)."""
        self.server = self.factory(*self.server_flags, root=self.root, port=self.server.port)
        return self.server

    def progress(self, name: str) -> dict:
        from dqn.process.progress import read_progress

        return read_progress(str(self.root / name))

    def train_step(self) -> int:
        return self.progress("learner").get("train_step", 0)

    def items(self, actor: str) -> int:
        return self.progress(actor).get("items", 0)

    def wait_training(self, at_least: int, timeout_s: float = 120) -> None:
        wait_until(lambda: self.train_step() >= at_least, timeout_s, f"learner train step >= {at_least}")

    def wait_items(self, actor: str, more_than: int, timeout_s: float = 120) -> None:
        wait_until(lambda: self.items(actor) > more_than, timeout_s, f"{actor} items > {more_than}")


@pytest.fixture
def system_factory(spawn, replay_server_factory, tmp_path) -> Callable[..., System]:
    """Builds a System under tmp_path/run (roles started by the test)."""
    return lambda *server_flags: System(spawn, replay_server_factory, tmp_path / "run", *server_flags)
