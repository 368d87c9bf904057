"""Sampled batches from a daemon thread: the train loop never sits inside a Reverb call it cannot leave.

A dataset iterator blocks while the replay server is down, and Python runs signal handlers only
between bytecodes; iterating on a daemon thread keeps the main loop responsive to SIGTERM and able
to report "no new data" while it waits.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import tensorflow as tf

log = logging.getLogger("learner")


class BatchFeed:
    """Iterates `make_dataset()` on a daemon thread into a bounded queue; rebuilds it when it ends."""

    def __init__(self, make_dataset: Callable[[], tf.data.Dataset], capacity: int = 2):
        self._make_dataset = make_dataset
        self._queue: queue.Queue = queue.Queue(maxsize=capacity)
        self._stop = threading.Event()
        self.idle_since = time.monotonic()
        self.restarts = 0
        threading.Thread(target=self._run, name="batch-feed", daemon=True).start()

    def get(self, timeout_s: float):
        """The next (experience, sample info) batch, or None if none arrived within `timeout_s`."""
        try:
            batch = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        self.idle_since = time.monotonic()
        return batch

    def close(self) -> None:
        """Stops feeding (a call stuck in Reverb is abandoned with the daemon thread)."""
        self._stop.set()

    def _put(self, batch) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(batch, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for experience, sample_info in self._make_dataset():
                    if not self._put((experience, sample_info)):
                        return
            except (tf.errors.OutOfRangeError, tf.errors.UnavailableError, tf.errors.DeadlineExceededError) as error:
                log.debug("replay dataset ended: %s", type(error).__name__)
            except Exception:  # noqa: BLE001 - keep the feed alive; the train loop reports the gap
                log.exception("replay dataset failed; rebuilding it")
                self._stop.wait(1.0)
            # A dataset with rate_limiter_timeout_ms ends quietly when no sample came in time: rebuild it.
            self.restarts += 1
