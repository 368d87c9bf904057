"""Remote calls under a deadline: Reverb 0.14 puts none on `insert`, `sample` or `mutate_priorities`.

A sample on an empty table or a call to a dead server waits forever. `DeadlineCaller` runs such calls on a daemon
thread: the caller's loop never blocks, a stuck call is abandoned, and the caller retries with a fresh client.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any


class CallTimeout(TimeoutError):
    """A remote call did not finish within its deadline (it was abandoned on its thread)."""


class DeadlineCaller:
    """Runs calls on a reused daemon worker thread with a deadline; at most one abandoned call lingers at a time.

    One long-lived worker, not a thread per call: starting a new thread several times a second grows a long-running
    process's memory steadily (short-lived threads spread over the C library's malloc arenas). A worker
    whose call overran its deadline is abandoned and a new one takes the next call once the stuck one has finished.
    """

    def __init__(self) -> None:
        self._worker: _Worker | None = None
        self._stuck: _Worker | None = None

    def call(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """fn() or CallTimeout; re-raises fn's own exception."""
        if self._stuck is not None:
            if self._stuck.busy.is_set():
                raise CallTimeout("the previous call is still stuck")
            self._stuck = None
        if self._worker is None:
            self._worker = _Worker()
        worker = self._worker
        done = worker.submit(fn)
        if not done.wait(timeout_s):
            self._stuck, self._worker = worker, None
            worker.retire()  # it exits once its stuck call returns
            raise CallTimeout(f"no answer within {timeout_s:.0f} s")
        if "error" in worker.outcome:
            raise worker.outcome["error"]
        return worker.outcome.get("value")


class _Worker:
    """A daemon thread running one submitted call at a time (for DeadlineCaller)."""

    def __init__(self) -> None:
        self.busy = threading.Event()
        self.outcome: dict[str, Any] = {}
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="remote-call", daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> threading.Event:
        """Starts fn(); the returned event is set when it has finished (outcome in `outcome`)."""
        done = threading.Event()
        self.outcome = {}
        self.busy.set()
        self._calls.put((fn, done))
        return done

    def retire(self) -> None:
        """Ends the thread after its current call."""
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, done = item
            try:
                self.outcome["value"] = fn()
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                self.outcome["error"] = error
            self.busy.clear()
            done.set()
