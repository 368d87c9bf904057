"""Role processes for `dqn-service local`, forked from one process that has already imported the ML stack.

Each role is a separate OS process with its own log, session and exit code; what forking changes is how it starts.
Importing TensorFlow, TF-Agents and Reverb costs seconds of CPU per process, and
`local` starts five roles on a small machine, so five identical imports would delay training by several seconds in
every run. multiprocessing's forkserver imports them once (`preload_modules()` of launcher/roles.py) and forks each
role from there.

Fork safety: the forkserver only imports modules. It runs no TF op and opens no gRPC channel (TF's thread pools
and gRPC's threads are created lazily, in each role after the fork), so every role initializes its own runtime as
a freshly started interpreter would. Its one extra thread is OpenBLAS's idle worker (numpy), which OpenBLAS's
own fork handler shuts down before each fork (and starts again when needed).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import signal
import subprocess

from launcher.network import isolation_refusal
from launcher.roles import CLI_ENTRY, load_entry, preload_modules


def start_forkserver(isolate_network: bool = False) -> None:
    """Starts the forkserver and its imports now, so they overlap the launcher's own config checks.

    With `isolate_network` it moves into a network namespace of its own first, where the kernel allows it
    (launcher/network.py); every role forked from it then lives there.
    """
    context = multiprocessing.get_context("forkserver")
    # An import that fails here is retried (and reported) in the role; the network's raises another error.
    context.set_forkserver_preload(preload_modules(isolate_network and isolation_refusal() is None))
    multiprocessing.forkserver.ensure_running()


def _run_role(name: str, argv: list[str], log_path: str, entry: str) -> None:
    """The forked child: its own session and log, then `entry(argv)`, the CLI's entry (which exits the process)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the forkserver ignores it (launcher/forkserver_signals.py)
    os.setsid()  # as start_new_session: Ctrl-C in the terminal reaches the launcher only, which stops roles in order
    try:
        with open("/proc/self/comm", "w", encoding="utf-8") as comm:  # `ps -o comm`, `top`: dqn-actor-0, ...
            comm.write(f"dqn-{name}"[:15])
    except OSError:
        pass  # not Linux: the name is cosmetic
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    load_entry(entry)(argv)


class ForkedRole:
    """A role forked from the forkserver, with the subset of `subprocess.Popen`'s interface the launcher uses."""

    def __init__(self, name: str, argv: list[str], log_path: str, entry: str = CLI_ENTRY):
        context = multiprocessing.get_context("forkserver")
        self._process = context.Process(target=_run_role, args=(name, argv, log_path, entry), name=name,
                                        daemon=False)
        self._process.start()

    @property
    def pid(self) -> int:
        """The role's PID."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """Exit code (negative: killed by that signal), or None while running."""
        return self._process.exitcode

    def poll(self) -> int | None:
        """Exit code, or None while running."""
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        """Waits for the exit; raises subprocess.TimeoutExpired as Popen.wait does."""
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(f"role {self._process.name}", timeout)
        return self._process.exitcode

    def send_signal(self, signum: int) -> None:
        """Sends `signum` unless the role has already exited."""
        if self._process.exitcode is None:
            try:
                os.kill(self._process.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


def role_error_line(log_path: str, start: int = 0) -> str:
    """": <message>" of the last "dqn-service <role>: error: <message>" line in a role's log past `start`, or "".

    A role that refuses its input (exit 2) says why in its own log; the run's console repeats it, so a user need not
    open the log to learn which setting to fix.
    """
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(start, os.path.getsize(log_path) - 65536))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    errors = [line for line in lines if line.startswith("dqn-service ") and ": error: " in line]
    return f": {errors[-1].split(': error: ', 1)[1]}" if errors else ""
