"""Replay-side rates for the learner's summaries: size, inserts/s, samples/s, samples per insert."""

from __future__ import annotations

import logging
import time

import reverb

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

    def measure(self) -> dict[str, float]:
        """{size, inserts_per_sec, samples_per_sec, samples_per_insert} in transitions; {} if no answer."""
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
