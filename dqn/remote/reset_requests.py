"""The evaluator's reset requests to the learner, through the one-item `learner_requests` table.

The evaluator decides (evaluator/reset_rule.py) because only it sees greedy returns; the learner acts on the request. A
request is the train step of the evaluation that asked for it: train steps only grow (the learner restores its own
from its checkpoint, along with the last request it applied), so each request is applied once whichever role
restarts, and the learner applies only requests that can be genuine (learner/triggers.py). With a shared key the
evaluator signs each request and the learner refuses unsigned ones (dqn/remote/item_trust.py). Both sides call
Reverb under a deadline: a lost request is re-sent, a stuck poll never stalls training.
"""

from __future__ import annotations

import threading

import numpy as np
import reverb

from dqn.remote.connection import RemoteConnection
from dqn.remote.item_trust import ItemSigner, Refusals
from dqn.remote.latest_item import UNCHANGED, LatestItemReader
from dqn.replay_layout.items import REQUESTS_TABLE, RESET_REQUEST_STEP_KEY, SIGNATURE_KEY


class ResetRequestSender:
    """The evaluator's side: `send(step)` queues a request; `flush()` tries to deliver it (call once per loop)."""

    def __init__(self, address: str, timeout_s: float, client: reverb.Client | None = None, key: str | None = None):
        self.connection = RemoteConnection(address, timeout_s, "reset request delivery", client=client)
        self._signer = ItemSigner(key)
        self._pending: int | None = None

    def send(self, train_step: int) -> None:
        """Asks the learner to reset on behalf of the evaluation at `train_step`; delivered now or by `flush`."""
        self._pending = train_step
        self.flush()

    def flush(self) -> None:
        """Delivers a pending request, if any; on failure keeps it for the next call."""
        if self._pending is None:
            return
        step = self._pending
        item = {RESET_REQUEST_STEP_KEY: np.int64(step), SIGNATURE_KEY: np.bytes_(self._signer.reset_request(step))}
        try:
            self.connection.call(lambda c: c.insert(item, priorities={REQUESTS_TABLE: 1.0}))
        except Exception:  # noqa: BLE001 - evaluating goes on; the next loop re-sends (warned, throttled)
            return
        self._pending = None


class ResetRequestWatcher:
    """The learner's side: polls `learner_requests` on a daemon thread.

    `latest` is the step of the newest request in the table that passed the signature check (-1 before any);
    `received` counts such requests, so a request equal to an earlier one is still seen as new. Requests refused
    for their signature are counted in `refused.count`.
    """

    def __init__(self, address: str, timeout_s: float, interval_s: float = 0.25, key: str | None = None):
        self.connection = RemoteConnection(address, timeout_s, "reset request polling")
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._reader = LatestItemReader(REQUESTS_TABLE, timeout_s)
        self._signer = ItemSigner(key)
        self.refused = Refusals("reset request")
        self.latest = -1
        self.received = 0
        threading.Thread(target=self._run, name="reset-requests", daemon=True).start()

    def close(self) -> None:
        """Stops polling (a call stuck in Reverb is abandoned with its daemon thread)."""
        self._stop.set()

    @staticmethod
    def _download(client: reverb.Client) -> tuple[int, bytes]:
        """The train step and signature of the request in the table."""
        sample = next(client.sample(REQUESTS_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
        return (int(np.asarray(sample.data[RESET_REQUEST_STEP_KEY])[0]),
                bytes(np.asarray(sample.data[SIGNATURE_KEY])[0]))

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                request = self.connection.call(lambda c: self._reader.fetch(c, self._download))
            except Exception:  # noqa: BLE001 - training goes on; the next poll retries (warned, throttled)
                continue
            if request is None or request is UNCHANGED:
                continue
            step, signature = request
            reason = self._signer.refusal(signature, self._signer.reset_request(step))
            if reason is not None:
                self.refused.refuse(f"train step {step}: {reason}")
                continue
            self.latest = step
            self.received += 1
