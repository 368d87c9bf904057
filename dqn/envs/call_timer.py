"""A deadline on every call into a user's env: a `step` or `reset` that does not return is interrupted.

A simulator waiting on a dead socket, a lock that is never released, a loop that never ends: the sub-env's call
never returns and the actor would stop collecting for good. While a vector step runs on the main thread, a
periodic `SIGALRM` checks how long the current sub-env call has run; past `limit_s` the handler raises
`EnvCallTimeout` inside that call. `RecoveringEnv` treats it like any exception of the env: the step is dropped,
the sub-env is recreated and the other sub-envs keep stepping.

Why a signal and not a worker thread or process per sub-env: it costs two `setitimer` calls per vector step
and one clock read per sub-env call, so envs stay in process at full speed. Blocking system calls (sockets,
sleeps, locks) and Python code are interrupted; native code that never returns to Python (a C loop that
ignores signals) is not. Only the main thread receives signals, so calls made from other threads (TF-Agents'
`TFPyEnvironment` in the evaluator's in-graph loop) run without a deadline.
"""

from __future__ import annotations

import signal
import threading
import time

#: The timer of the vector step in progress (one at a time: steps run on the main thread); the handler asks it.
_armed: EnvCallTimer | None = None


#: Arms between two checks that SIGALRM still runs `_on_alarm`.
HANDLER_CHECK_EVERY = 64


def _on_alarm(_signum: int, _frame: object) -> None:
    """The one SIGALRM handler every timer shares: asks the armed timer."""
    if _armed is not None:
        _armed.check()


class EnvCallTimeout(Exception):
    """A sub-env's step or reset ran past the call time limit (raised inside the call)."""


class EnvCallTimer:
    """Arms SIGALRM around vector steps (`with timer:`); `enter()` / `leave()` bracket each call into a sub-env.

    Outside the main thread or without a limit the `with` block runs its calls without a deadline.
    """

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        # Set around every call into a sub-env (`enter`/`leave`, or directly on the hot path): plain attributes,
        # because a vector step makes one call per sub-env and method calls would cost more than the env's step.
        self.entered_at: float | None = None
        self.call = ""
        # Checks often enough that a call is interrupted within about a tenth of its limit after it passes.
        self._interval_s = min(1.0, max(0.01, limit_s / 10))
        self._arms = 0
        self._armed = False

    def enter(self, what: str) -> None:
        """A call into a sub-env starts now (`what` names it in the error)."""
        self.call = what
        self.entered_at = time.monotonic()

    def leave(self) -> None:
        """The call returned (or raised)."""
        self.entered_at = None

    def __enter__(self) -> EnvCallTimer:
        """Starts the periodic check for the calls made inside the `with` block, where it can run."""
        self._armed = self._arm()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stops the periodic check (whether the block returned or raised)."""
        if self._armed:
            self._armed = False
            self._disarm()

    def _arm(self) -> bool:
        """Starts the periodic check; False where it cannot run (no limit, or off the main thread)."""
        global _armed
        if self.limit_s <= 0 or threading.current_thread() is not threading.main_thread():
            return False
        # The handler is checked on the first arm and every HANDLER_CHECK_EVERY arms after (asking costs more than a
        # vector step's bookkeeping): something else may have taken SIGALRM meanwhile (a test runner's timeout).
        self._arms += 1
        if self._arms % HANDLER_CHECK_EVERY == 1 and signal.getsignal(signal.SIGALRM) is not _on_alarm:
            signal.signal(signal.SIGALRM, _on_alarm)
        _armed = self
        signal.setitimer(signal.ITIMER_REAL, self._interval_s, self._interval_s)
        return True

    @staticmethod
    def _disarm() -> None:
        """Stops the periodic check."""
        global _armed
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        _armed = None

    def check(self) -> None:
        """Raises EnvCallTimeout if the current call into a sub-env has run past the limit (from the handler)."""
        entered = self.entered_at
        if entered is not None and time.monotonic() - entered >= self.limit_s:
            self.entered_at = None
            raise EnvCallTimeout(f"{self.call} did not return within {self.limit_s:g} s (--env-call-timeout-s)")
