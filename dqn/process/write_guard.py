"""Writes that may fail on a full or failing disk (summaries, progress files, results, exports) without raising.

Every role keeps running on a full run root: what it could not write is counted and logged, and written again
at its next interval. Checkpoints have their own handling (the learner's and the replay server's): a failed save
also removes its partial files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import tensorflow as tf

from dqn.process.log_throttle import LogThrottle

#: Errors a write to a full or failing disk raises (TensorFlow's own, or Python's for plain files).
WRITE_ERRORS = (tf.errors.OpError, OSError)
#: A failing write of one kind is logged at most this often (each failure is still counted).
LOG_INTERVAL_S = 60.0

T = TypeVar("T")


def first_line(error: BaseException) -> str:
    """The first line of an error's message ("" for none): what a one-line log of a failed write shows."""
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


class WriteGuard:
    """Runs writes that may fail on a full or failing disk, without raising.

    A failure is counted and logged (once per LOG_INTERVAL_S per kind) and the call returns None, so the caller
    goes on and tries again at its next interval.
    """

    def __init__(self, role: str) -> None:
        self.failures: dict[str, int] = {}
        self._throttles: dict[str, LogThrottle] = {}
        self._log = logging.getLogger(role)

    def __call__(self, what: str, write: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """`write(*args, **kwargs)`'s result, or None where it raised a write error (`what` names it in the log)."""
        try:
            return write(*args, **kwargs)
        except WRITE_ERRORS as error:
            self.failures[what] = self.failures.get(what, 0) + 1
            if self._throttles.setdefault(what, LogThrottle(LOG_INTERVAL_S)).ready():
                self._log.error("%s failed (%s: %s; %d failure(s) so far); the work goes on and retries at the "
                                "next interval", what, type(error).__name__, first_line(error), self.failures[what])
            return None
