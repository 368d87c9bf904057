"""The readers' side (actors, evaluator, status): the latest published weights, fetched without blocking."""

from __future__ import annotations

import threading
import time

from dqn.remote.connection import RemoteConnection
from dqn.remote.item_trust import AcceptedStep, ItemSigner, Refusals, implausible_weights
from dqn.remote.latest_item import UNCHANGED, LatestItemReader
from dqn.remote.weights_wire import PublishedWeights, sample_weights
from dqn.replay_layout.items import VARIABLES_TABLE


class WeightsPuller:
    """Fetches the latest published weights on a daemon thread; the caller never blocks.

    `latest()` returns the newest weights not yet handed out (or None). `status` says what the
    puller is doing ("waiting for first weights", "replay unreachable", "ok"). Weights that are unsigned or badly
    signed (with a shared `key`) or whose train step no learner could have reached are never handed out; they are
    counted in `refused.count` (dqn/remote/item_trust.py).
    """

    def __init__(self, address: str, timeout_s: float, min_interval_s: float = 0.05, key: str | None = None):
        self.connection = RemoteConnection(address, timeout_s, "weight refresh")
        self._min_interval_s = min_interval_s
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._latest: PublishedWeights | None = None
        self._accepted: AcceptedStep | None = None
        self._signer = ItemSigner(key)
        self.refused = Refusals("weights item")
        self._reader = LatestItemReader(VARIABLES_TABLE, timeout_s)
        self.status = "waiting for first weights"
        self.downloads, self.download_s, self.download_bytes = 0, 0.0, 0  # for the role's reports
        threading.Thread(target=self._run, name="weights-puller", daemon=True).start()
        self._wanted.set()

    def request(self) -> None:
        """Asks for a refresh; returns immediately."""
        self._wanted.set()

    def latest(self) -> PublishedWeights | None:
        """Newest weights fetched since the last call, or None."""
        with self._lock:
            weights, self._latest = self._latest, None
        return weights

    def close(self) -> None:
        """Stops the thread (a call stuck in Reverb is abandoned with its daemon thread)."""
        self._stop.set()
        self._wanted.set()

    def _download(self, client) -> PublishedWeights:
        """`sample_weights`, counted: how often and how long weights travel is part of the bottleneck verdict."""
        started = time.perf_counter()
        weights = sample_weights(client)
        self.downloads += 1
        self.download_s += time.perf_counter() - started
        self.download_bytes += sum(v.nbytes for v in weights.variables)
        return weights

    def _refusal(self, weights: PublishedWeights, now: float) -> str | None:
        """Why `weights` are refused (their signature, then their train step), or None."""
        expected = self._signer.weights(weights.variables, weights.train_step, weights.exploration_start) \
            if self._signer.signing else b""
        return self._signer.refusal(weights.signature, expected) or implausible_weights(
            weights.train_step, weights.exploration_start, self._accepted, now)

    def _take(self, weights: PublishedWeights) -> None:
        """Hands out weights of a new train step, unless refused."""
        now = time.monotonic()
        reason = self._refusal(weights, now)
        if reason is not None:
            self.refused.refuse(f"train step {weights.train_step}: {reason}")
            return
        if self._accepted is not None and weights.train_step == self._accepted.train_step:
            return
        self._accepted = AcceptedStep(weights.train_step, now)
        with self._lock:
            self._latest = weights

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            self._wanted.clear()
            if self._stop.is_set():
                return
            try:
                weights = self.connection.call(lambda c: self._reader.fetch(c, self._download))
            except Exception:  # noqa: BLE001 - any failure keeps the current weights and retries (warned, throttled)
                self.status = "replay unreachable"
                self._wanted.set()
            else:
                if weights is None:
                    self.status = "waiting for first weights"
                    self._wanted.set()  # keep polling until the learner publishes
                else:
                    self.status = "ok"
                    if weights is not UNCHANGED:
                        self._take(weights)
            self._stop.wait(self._min_interval_s)


def fetch_weights(address: str, timeout_s: float) -> PublishedWeights | None:
    """The currently published weights, or None if there are none within `timeout_s` (never hangs)."""
    puller = WeightsPuller(address, timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            weights = puller.latest()
            if weights is not None:
                return weights
            time.sleep(0.05)
        return None
    finally:
        puller.close()
