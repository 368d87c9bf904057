"""The learner's side: publishing weights to the `variables` table without ever stalling training."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import reverb

from dqn.remote.deadline import CallTimeout, DeadlineCaller
from dqn.remote.weights_wire import PublishedWeights, publish_weights

log = logging.getLogger(__name__)


class WeightsPublisher:
    """Publishes weights from a daemon thread, newest wins: a stuck insert never stalls training."""

    def __init__(self, address: str, timeout_s: float):
        self._address = address
        self._timeout_s = timeout_s
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
        caller, client = DeadlineCaller(), reverb.Client(self._address)
        while True:
            with self._condition:
                while self._pending is None:
                    self._condition.wait()
                weights, self._pending, self._busy = self._pending, None, True
            try:
                caller.call(lambda w=weights, c=client: publish_weights(c, w.variables, w.train_step,
                                                                        w.exploration_start), self._timeout_s)
                self.published_step = weights.train_step
            except Exception as error:  # noqa: BLE001 - keep training; the next publish retries
                if isinstance(error, CallTimeout):
                    client = reverb.Client(self._address)
                log.warning("publishing weights of step %d failed (%s); the next publish retries",
                            weights.train_step, error)
            with self._condition:
                self._busy = False
                self._condition.notify_all()
