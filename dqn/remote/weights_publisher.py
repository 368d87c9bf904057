"""The learner's side: publishing weights to the `variables` table without ever stalling training."""

from __future__ import annotations

import threading
import time

import numpy as np

from dqn.remote.connection import RemoteConnection
from dqn.remote.item_trust import ItemSigner
from dqn.remote.weights_wire import PublishedWeights, publish_weights


class WeightsPublisher:
    """Publishes weights from a daemon thread, newest wins: a stuck insert never stalls training.

    With a shared `key` each item is signed (on the thread, so training never waits for the hash).
    """

    def __init__(self, address: str, timeout_s: float, key: str | None = None):
        self.connection = RemoteConnection(address, timeout_s, "weights publishing")
        self._signer = ItemSigner(key)
        self._pending: PublishedWeights | None = None
        self._condition = threading.Condition()
        self._busy = False
        self.published_step = -1
        threading.Thread(target=self._run, name="weights-publisher", daemon=True).start()

    def submit(self, variables: list[np.ndarray], train_step: int, exploration_start: int = 0) -> None:
        """Queues weights for publishing (replacing any not yet sent); returns immediately."""
        with self._condition:
            self._pending = PublishedWeights(variables, train_step, exploration_start)
            self._condition.notify()

    def wait_idle(self, timeout_s: float) -> bool:
        """Waits until everything submitted was published (or given up); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._condition:
            while self._pending is not None or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def _run(self) -> None:
        while True:
            with self._condition:
                while self._pending is None:
                    self._condition.wait()
                weights, self._pending, self._busy = self._pending, None, True
            try:
                signature = self._signer.weights(weights.variables, weights.train_step, weights.exploration_start)
                self.connection.call(lambda c, w=weights, s=signature: publish_weights(
                    c, w.variables, w.train_step, w.exploration_start, s))
                self.published_step = weights.train_step
            except Exception:  # noqa: BLE001 - keep training; the next publish retries (warned, throttled)
                pass
            with self._condition:
                self._busy = False
                self._condition.notify_all()
