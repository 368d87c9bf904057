"""How often a repeated warning is logged, in every role."""

from __future__ import annotations

import math
import time


class LogThrottle:
    """`ready()` is True at most once per `interval_s` seconds: a warning that repeats is logged that often."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._last = -math.inf

    def ready(self) -> bool:
        """True (and the interval starts over) if `interval_s` passed since it was last True."""
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return False
        self._last = now
        return True
