"""Periodic learner work (publish, checkpoint, export, summaries) as small step triggers, as in TF-Agents' triggers.

The learner's train step advances by train_steps_per_call per loop iteration, so a trigger fires when a multiple
of its interval lies in the steps just trained, not only when the step hits the multiple exactly.
"""

from __future__ import annotations

from collections.abc import Callable


class IntervalTrigger:
    """Calls `fn(step)` whenever the train step passes a multiple of `interval`; interval 0 = never."""

    def __init__(self, interval: int, fn: Callable[[int], None], start_step: int = 0):
        self.interval = interval
        self._fn = fn
        self._last_step = start_step

    def __call__(self, step: int) -> bool:
        """Call with the train step after each train call; True if it fired."""
        fired = self.interval > 0 and step // self.interval > self._last_step // self.interval
        self._last_step = step
        if fired:
            self._fn(step)
        return fired
