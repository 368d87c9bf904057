"""The learner's periodic work as step triggers, as in TF-Agents' `Learner(triggers=...)`; `make_triggers` builds them.

The train loop calls each trigger with the train step after every train call and knows nothing of what they do.
The train step advances by train_steps_per_call per call, so an interval trigger fires when a multiple of its
interval lies in the steps just trained, not only when the step hits the multiple exactly.
"""

from __future__ import annotations

from collections.abc import Callable

from dqn.remote.item_trust import Refusals
from dqn.remote.reset_requests import ResetRequestWatcher
from dqn.settings.config import LearnerConfig

#: A trigger: called with the train step after each train call; True if it did its work.
Trigger = Callable[[int], bool]


class IntervalTrigger:
    """Calls `fn(step)` whenever the train step passes a multiple of `interval`; interval 0 = never."""

    def __init__(self, interval: int, fn: Callable[[int], None], start_step: int = 0):
        self.interval = interval
        self._fn = fn
        self._last_step = start_step
        self._requested = False

    def request(self) -> None:
        """Fire at the next call, whatever the interval (the interval's own firings stay as they were)."""
        self._requested = True

    def __call__(self, step: int) -> bool:
        """Call with the train step after each train call; True if it fired."""
        fired = self._requested or (self.interval > 0 and step // self.interval > self._last_step // self.interval)
        self._last_step = step
        self._requested = False
        if fired:
            self._fn(step)
        return fired


class ResetRequestTrigger:
    """Applies the evaluator's newest reset request at the first train call that sees it, then requests a publish.

    Only a request that can be genuine is applied: above the last applied one (the evaluator asks on behalf of
    ever later evaluations) and at or below the learner's own train step (it names an evaluation of weights this
    learner published). Anything else, such as a request from whoever else reaches the control server, is
    refused and counted in `refused`: applying it would start the run afresh, and checkpointing a huge step as
    the last applied one would make every later genuine request look old.
    Reading `ResetRequestWatcher.latest` is an in-memory int read (its thread polls the server), cheap enough for
    every train call, so how soon a reset takes effect does not depend on any interval.
    """

    def __init__(self, watcher: ResetRequestWatcher, applied: int, apply: Callable[[int, int], None],
                 publish: IntervalTrigger):
        """`applied`: the last request applied (restored from the checkpoint); `apply(step, request)` resets."""
        self._watcher = watcher
        self._applied = applied
        self._apply = apply
        self._publish = publish
        self._received = 0  # the watcher's count of requests when this trigger last looked
        self.refused = Refusals("reset request")

    def __call__(self, step: int) -> bool:
        """Applies a new request that can be genuine; True if it did."""
        received = self._watcher.received
        if received == self._received:
            return False
        self._received = received
        requested = self._watcher.latest
        if requested == self._applied:  # the applied request, still in the table (say, after a restart)
            return False
        if not self._applied < requested <= step:
            self.refused.refuse(f"train step {requested}: not after the last applied request ({self._applied}) and "
                                f"at or before this learner's train step ({step})")
            return False
        self._apply(step, requested)
        self._applied = requested
        self._publish.request()  # the fresh weights and their exploration start go out at once
        return True


def make_triggers(config: LearnerConfig, step: int, *, reset_requests: ResetRequestWatcher, applied_request: int,
                  apply_reset_request: Callable[[int, int], None], publish: Callable[[int], None],
                  checkpoint: Callable[[int], None], export: Callable[[int], None],
                  write_summaries: Callable[[int], None], warn_no_inserts: Callable[[int], None]) -> list[Trigger]:
    """The learner's triggers from train step `step` on, in the order they run after each train call.

    The reset trigger runs before the publish trigger, so a reset's weights go out in the same call. The
    no-inserts warning runs after the summaries, on their interval: it reads their replay measurement.
    """
    publish_trigger = IntervalTrigger(config.publish_interval, publish, step)
    return [ResetRequestTrigger(reset_requests, applied_request, apply_reset_request, publish_trigger),
            publish_trigger,
            IntervalTrigger(config.checkpoint_interval, checkpoint, step),
            IntervalTrigger(config.export_interval, export, step),
            IntervalTrigger(config.summary_interval, write_summaries, step),
            IntervalTrigger(config.summary_interval, warn_no_inserts, step)]
