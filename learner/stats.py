"""Replay-side rates for the learner's summaries, and the warning that actors stopped inserting.

Rates: size, inserts/s, samples/s, samples per insert, seconds since the last insert.
"""

from __future__ import annotations

import logging
import time

import reverb

from dqn.process.log_throttle import LogThrottle
from dqn.remote.replay_client import server_info
from dqn.replay_layout.items import REPLAY_TABLE

log = logging.getLogger("learner")


class ReplayRates:
    """Differences of the replay table's insert/sample counters between two calls."""

    def __init__(self, client: reverb.Client, timeout_s: float, transitions_per_item: int = 1):
        self._client = client
        self._per_item = transitions_per_item  # figures are reported in transitions
        self._timeout_s = timeout_s
        self._last: tuple[float, int, int] | None = None
        self.last_insert_time = time.monotonic()
        self.latest: dict[str, float] = {}  # what the last `measure()` returned
        # A baseline now: the first summary then measures from here. Without one, a slow env's first summary
        # (minutes in) found no earlier count to compare with and reported no insert since the learner started.
        self._measure()

    def measure(self) -> dict[str, float]:
        """{size, inserts_per_sec, samples_per_sec, samples_per_insert} in transitions; {} if no answer."""
        self.latest = self._measure()
        return self.latest

    def _measure(self) -> dict[str, float]:
        try:
            info = server_info(self._client, self._timeout_s)[REPLAY_TABLE]
        except Exception as error:  # noqa: BLE001 - summaries must not stop training
            log.warning("replay stats unavailable: %s", type(error).__name__)
            return {}
        now = time.monotonic()
        inserts = info.rate_limiter_info.insert_stats.completed
        samples = info.rate_limiter_info.sample_stats.completed
        values = {"size": float(info.current_size * self._per_item)}
        if self._last is not None:
            then, last_inserts, last_samples = self._last
            elapsed = max(now - then, 1e-9)
            new_inserts, new_samples = inserts - last_inserts, samples - last_samples
            values["inserts_per_sec"] = new_inserts * self._per_item / elapsed
            values["samples_per_sec"] = new_samples * self._per_item / elapsed
            values["samples_per_insert"] = new_samples / max(new_inserts, 1)
            if new_inserts > 0:
                self.last_insert_time = now
        values["seconds_since_insert"] = now - self.last_insert_time
        self._last = (now, inserts, samples)
        return values


class NoInsertWarning:
    """Warns (at most once per `throttle`) when the last replay measurement saw no insert for `timeout_s`."""

    def __init__(self, rates: ReplayRates, timeout_s: float, throttle: LogThrottle):
        self._rates = rates
        self._timeout_s = timeout_s
        self._throttle = throttle

    def __call__(self, step: int) -> None:
        """Logs the warning if actors stopped inserting; training goes on on the stored data."""
        stalled = self._rates.latest.get("seconds_since_insert", 0.0)
        if stalled >= self._timeout_s and self._throttle.ready():
            log.warning("no new data inserted for %.0f s (actors stopped?); training on stored data", stalled)
