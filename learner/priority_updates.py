"""Prioritized replay on the learner side (Schaul et al. 2016, Ape-X): importance weights and priority updates.

The server samples with Reverb's `Prioritized(priority_exponent)` selector. The learner writes back
|TD error| on the scale of `dqn.replay_layout.priority_scale` (divided by the largest |TD error| it has seen, so
1.0 is the top).
New items enter at 1.0, the maximum (PER's rule), or with `initial_priority=td_error` at the actor's own
|TD error| on its own such scale (Ape-X). Updates go out on a daemon thread under a deadline, so a slow or
dead server never stalls training; updates that cannot keep up are dropped (the keys keep their old
priority), which is logged and counted.
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from dqn.model.schedules import linear_anneal
from dqn.remote.connection import RemoteConnection
from dqn.replay_layout.priority_scale import PriorityScale
from dqn.settings.config import LearnerConfig


def importance_beta(config: LearnerConfig, train_step: int) -> float:
    """β annealed linearly from importance_exponent_start to 1 over importance_anneal_steps (PER's schedule)."""
    anneal_steps = config.importance_anneal_steps or config.max_train_steps
    return linear_anneal(config.importance_exponent_start, 1.0, anneal_steps, train_step)


def importance_weights(probability: np.ndarray, table_size: np.ndarray, beta: float) -> np.ndarray:
    """w_i = (N * P_i)^-β / max_j w_j: corrects the bias of non-uniform sampling, scaled to at most 1."""
    weights = (np.maximum(table_size, 1) * np.maximum(probability, 1e-12)) ** -beta
    return (weights / weights.max()).astype(np.float32)


class PriorityUpdater:
    """Normalizes |TD errors| to priorities and sends them to the replay table from a daemon thread."""

    def __init__(self, address: str, table: str, timeout_s: float, max_pending: int = 8):
        self.connection = RemoteConnection(address, timeout_s, "priority update")
        self._table = table
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._stop = threading.Event()
        self.scale = PriorityScale()
        self.sent = 0
        self.dropped = 0
        self.failed = 0
        threading.Thread(target=self._run, name="priority-updates", daemon=True).start()

    def submit(self, keys: np.ndarray, td_errors: np.ndarray) -> None:
        """Queues new priorities for the sampled keys; drops the update if the sender is backed up."""
        updates = dict(zip(np.asarray(keys).astype(np.uint64).tolist(), self.scale(td_errors).tolist(),
                           strict=True))
        try:
            self._queue.put_nowait(updates)
        except queue.Full:
            self.dropped += 1

    def wait_idle(self, timeout_s: float) -> bool:
        """True once every queued update was handed to the server (or dropped on failure)."""
        done = threading.Event()
        threading.Thread(target=lambda: (self._queue.join(), done.set()), daemon=True).start()
        return done.wait(timeout_s)

    def close(self) -> None:
        """Stops the sender thread (a call stuck on the server is abandoned with it)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                updates = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self.connection.call(lambda c, u=updates: c.mutate_priorities(self._table, updates=u))
                self.sent += 1
            except Exception:  # noqa: BLE001 - the keys keep their old priority (counted; warned, throttled)
                self.failed += 1
            finally:
                self._queue.task_done()
