"""The evaluator's reset requests to the learner, through the one-item `learner_requests` table.

The evaluator decides (evaluator/reset_rule.py) because only it sees greedy returns; the learner acts on the request. A
request is the train step of the evaluation that asked for it: train steps only grow (the learner restores its own
from its checkpoint, along with the last request it applied), so each request is applied once whichever role
restarts. Both sides call Reverb under a deadline: a lost request is re-sent, a stuck poll never stalls training.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import reverb

from dqn.remote.deadline import CallTimeout, DeadlineCaller
from dqn.remote.latest_item import UNCHANGED, LatestItemReader
from dqn.replay_layout.items import REQUESTS_TABLE, RESET_REQUEST_STEP_KEY

log = logging.getLogger(__name__)

#: A failing poll or send is logged at most this often.
LOG_INTERVAL_S = 60.0


class ResetRequestSender:
    """The evaluator's side: `send(step)` queues a request; `flush()` tries to deliver it (call once per loop)."""

    def __init__(self, client: reverb.Client, address: str, timeout_s: float):
        self._client, self._address, self._timeout_s = client, address, timeout_s
        self._caller = DeadlineCaller()
        self._pending: int | None = None
        self._last_log = 0.0

    def send(self, train_step: int) -> None:
        """Asks the learner to reset on behalf of the evaluation at `train_step`; delivered now or by `flush`."""
        self._pending = train_step
        self.flush()

    def flush(self) -> None:
        """Delivers a pending request, if any; on failure keeps it for the next call."""
        if self._pending is None:
            return
        step = self._pending
        try:
            self._caller.call(lambda c=self._client: c.insert({RESET_REQUEST_STEP_KEY: np.int64(step)},
                                                              priorities={REQUESTS_TABLE: 1.0}), self._timeout_s)
        except Exception as error:  # noqa: BLE001 - evaluating goes on; the next loop re-sends
            if isinstance(error, CallTimeout):
                self._client = reverb.Client(self._address)
            if time.monotonic() - self._last_log >= LOG_INTERVAL_S:
                self._last_log = time.monotonic()
                log.warning("reset request of train step %d not delivered (%s); retrying", step, error)
            return
        self._pending = None


class ResetRequestWatcher:
    """The learner's side: polls `learner_requests` on a daemon thread; `latest` is the newest request (or -1)."""

    def __init__(self, address: str, timeout_s: float, interval_s: float = 0.25):
        self._address, self._timeout_s, self._interval_s = address, timeout_s, interval_s
        self._stop = threading.Event()
        self._reader = LatestItemReader(REQUESTS_TABLE, timeout_s)
        self.latest = -1
        threading.Thread(target=self._run, name="reset-requests", daemon=True).start()

    def close(self) -> None:
        """Stops polling (a call stuck in Reverb is abandoned with its daemon thread)."""
        self._stop.set()

    @staticmethod
    def _download(client: reverb.Client) -> int:
        """The train step of the request in the table."""
        sample = next(client.sample(REQUESTS_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
        return int(np.asarray(sample.data[RESET_REQUEST_STEP_KEY])[0])

    def _run(self) -> None:
        caller, client, last_log = DeadlineCaller(), reverb.Client(self._address), 0.0
        while not self._stop.wait(self._interval_s):
            try:
                step = caller.call(lambda c=client: self._reader.fetch(c, self._download), self._timeout_s)
            except Exception as error:  # noqa: BLE001 - training goes on; the next poll retries
                if isinstance(error, CallTimeout):
                    client = reverb.Client(self._address)
                if time.monotonic() - last_log >= LOG_INTERVAL_S:
                    last_log = time.monotonic()
                    log.warning("polling %s for reset requests failed (%s); retrying", self._address, error)
                continue
            if step is not None and step is not UNCHANGED:
                self.latest = max(self.latest, step)
