"""Deadlines: DeadlineCaller (remote calls on one reused worker thread) and the watchdog on a role's teardown."""

import subprocess
import sys
import threading
import time

import pytest

from dqn.remote.deadline import CallTimeout, DeadlineCaller


def test_calls_return_values_and_errors_on_one_reused_thread():
    caller = DeadlineCaller()
    threads = {caller.call(lambda: threading.get_ident(), 5.0) for _ in range(20)}
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert caller.call(lambda: 41 + 1, 5.0) == 42
    with pytest.raises(KeyError, match="missing"):
        caller.call(lambda: {}["missing"], 5.0)
    assert caller.call(lambda: threading.get_ident(), 5.0) in threads  # an error does not cost the worker


def test_a_stuck_call_times_out_and_blocks_only_until_it_returns():
    caller, release = DeadlineCaller(), threading.Event()
    started = time.monotonic()
    with pytest.raises(CallTimeout, match="no answer within"):
        caller.call(lambda: release.wait(30), 0.3)
    assert time.monotonic() - started < 5
    with pytest.raises(CallTimeout, match="still stuck"):
        caller.call(lambda: "never runs", 5.0)
    release.set()
    deadline = time.monotonic() + 5
    while True:  # the abandoned call returns; then a fresh worker takes calls
        try:
            assert caller.call(lambda: "fresh", 5.0) == "fresh"
            break
        except CallTimeout:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_teardown_that_hangs_after_the_work_is_saved_ends_with_the_roles_exit_code():
    # The process hangs in a lock nobody releases, as a destructor stuck in a gRPC call would.
    script = ("import threading; from dqn.process.runtime import exit_if_teardown_hangs; "
              "exit_if_teardown_hangs(3, 0.5); threading.Event().wait()")
    started = time.monotonic()
    finished = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    assert finished.returncode == 3, finished.stderr
    assert "teardown still running" in finished.stderr
    assert time.monotonic() - started < 30
