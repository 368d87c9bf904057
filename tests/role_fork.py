"""Role processes for the tests, forked from one forkserver that has imported the ML stack, as `local` starts its.

A role started as `python -m launcher <role>` pays the import of TensorFlow, TF-Agents and Reverb (about 4.5 CPU-s
on a 2-core test machine) before its first line of work, and the system tests start several at once. Forked from
launcher/forked.py's forkserver, a role is the same process the product's `local` runs: the CLI entry with the
role's argv, its own session and log file, its exit code. Fresh interpreters stay tested elsewhere: `run_cli` (bad
input, one-shot commands), the namespaced roles of the multi-host and verdict tests, and the containers.
"""

from __future__ import annotations

import multiprocessing
import os
import signal

from launcher.forked import ForkedRole, _run_role, start_forkserver
from launcher.roles import CLI_ENTRY

#: Every role forked in this test process, so that none outlives it (multiprocessing would wait for it at exit).
_started: list[ForkedRole] = []


def _run_with_environment(name: str, argv: list[str], log_path: str, environment: dict[str, str],
                          directory: str) -> None:
    """The forked child: the environment and working directory a subprocess would get, then the role."""
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(directory)
    _run_role(name, argv, log_path, CLI_ENTRY)


class TestRole(ForkedRole):
    """A role forked with its own environment and working directory (ForkedRole's Popen-like interface)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, name: str, argv: list[str], log_path: str, environment: dict[str, str], directory: str):
        if not _started:
            start_forkserver()
        context = multiprocessing.get_context("forkserver")
        self._process = context.Process(target=_run_with_environment, name=name, daemon=False,
                                        args=(name, argv, log_path, environment, directory))
        self._process.start()
        _started.append(self)


def kill_leftovers() -> None:
    """SIGKILLs and reaps every forked role still running (a test that did not stop what it started)."""
    for role in _started:
        if role.poll() is None:
            role.send_signal(signal.SIGKILL)
            role.wait(30)
