"""Replay-side rates for the learner's summaries: size, inserts/s, samples/s, samples per insert."""

from __future__ import annotations

import logging
import time

import numpy as np
import reverb
import tensorflow as tf

from dqn.replay import REPLAY_TABLE, server_info

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


class GraphScalars:
    """Writes a dict of scalars to a summary writer in one graph call.

    Each eager `tf.summary.scalar` kept ~0.5 KB of the learner's memory for good (Python 3.11 + TF 2.15,
    tensorflow/tensorflow#62551): at ~400 SGD steps/s and a summary every 100 steps that alone grew the learner
    ~4 MiB/min. One traced function per set of names takes all values as one tensor.
    """

    def __init__(self, writer):
        self._writer = writer
        self._functions: dict[tuple[str, ...], object] = {}

    def write(self, step: int, scalars: dict[str, float]) -> None:
        """Writes every scalar at `step`."""
        names = tuple(sorted(scalars))
        function = self._functions.get(names)
        if function is None:
            function = self._functions[names] = self._graph(names)
        function(np.int64(step), np.array([scalars[name] for name in names], dtype=np.float32))

    def _graph(self, names: tuple[str, ...]):
        writer = self._writer

        @tf.function(autograph=False)
        def write(step, values):
            with writer.as_default(step=step):
                for index, name in enumerate(names):
                    tf.summary.scalar(name, values[index])

        return write
