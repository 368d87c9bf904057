"""Client-side replay layout: table names, bounded server waits, weight publishing and pulling.

Reverb 0.14 has no deadline on sampling (`Client.sample` blocks forever on an empty table or a
dead server). Weight pulls therefore run on a daemon thread (`WeightsPuller`): a stuck call can
only stall that thread, never the actor's or evaluator's loop.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from typing import Any

import numpy as np
import reverb

from dqn.agent import POLICY_VARIABLES_KEY, TRAIN_STEP_KEY, AgentBundle, replay_signature, variables_signature
from dqn.config import CommonConfig
from dqn.errors import BadInput, ServiceError

REPLAY_TABLE = "replay"
VARIABLES_TABLE = "variables"

log = logging.getLogger(__name__)


class ReplayUnreachable(ServiceError):
    """The replay server did not answer within the allowed time."""


def server_info(client: reverb.Client, timeout_s: float) -> dict[str, Any]:
    """Table infos with a deadline (Reverb's own default is to wait forever)."""
    return client.server_info(timeout=max(1, int(round(timeout_s))))


def wait_for_server(address: str, wait_s: float, call_timeout_s: float = 5.0) -> reverb.Client:
    """A client once the server answers; ReplayUnreachable after `wait_s` of backoff."""
    client = reverb.Client(address)
    deadline = time.monotonic() + wait_s
    delay = 0.25
    while True:
        try:
            info = server_info(client, min(call_timeout_s, max(1.0, deadline - time.monotonic())))
        except (reverb.errors.DeadlineExceededError, RuntimeError, ValueError) as error:
            if time.monotonic() + delay > deadline:
                raise ReplayUnreachable(f"cannot reach replay server at {address} after {wait_s:.0f} s "
                                        f"({type(error).__name__}); is it running and is the address right?") from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if REPLAY_TABLE not in info or VARIABLES_TABLE not in info:
            raise ReplayUnreachable(f"server at {address} has tables {sorted(info)}, not "
                                    f"{REPLAY_TABLE!r}/{VARIABLES_TABLE!r}: is it a dqn-service replay server?")
        return client


class SpecMismatch(BadInput):
    """The server's tables were created for other specs (another env or network) than this role's."""


def check_table_matches(client: reverb.Client, bundle: AgentBundle, config: CommonConfig, role: str) -> None:
    """Refuses to work with tables whose signatures differ from ours: one bad writer poisons a table."""
    info = server_info(client, config.rpc_timeout_s)
    for table, expected in ((REPLAY_TABLE, replay_signature(bundle)), (VARIABLES_TABLE, variables_signature(bundle))):
        if info[table].signature != expected:
            raise SpecMismatch(
                f"the {table!r} table at {config.replay_address} was built for other specs than this {role} "
                f"(env {config.env_id!r}, layers {config.fc_layer_params}): server {info[table].signature} vs "
                f"ours {expected}. Start every role with the same --env-id and network settings.")


@dataclasses.dataclass(frozen=True)
class PublishedWeights:
    """Policy weights as numpy arrays plus the train step they were published at."""

    variables: list[np.ndarray]
    train_step: int

    def digest(self) -> str:
        """Exact fingerprint of the weights (to show two processes hold the same ones)."""
        return weights_digest(self.variables)


def weights_digest(variables: list[np.ndarray]) -> str:
    """SHA-1 over the raw bytes of each array, in order."""
    sha = hashlib.sha1()
    for value in variables:
        sha.update(np.ascontiguousarray(value).tobytes())
    return sha.hexdigest()


def publish_weights(client: reverb.Client, variables: list[np.ndarray], train_step: int) -> None:
    """Replaces the single `variables` item (max_size=1, FIFO) with these weights."""
    client.insert({POLICY_VARIABLES_KEY: list(variables), TRAIN_STEP_KEY: np.int64(train_step)},
                  priorities={VARIABLES_TABLE: 1.0})


def _sample_weights(client: reverb.Client) -> PublishedWeights:
    sample = next(client.sample(VARIABLES_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
    # Items written with `insert` are one timestep long: drop that leading axis.
    return PublishedWeights([np.asarray(v)[0] for v in sample.data[POLICY_VARIABLES_KEY]],
                            int(np.asarray(sample.data[TRAIN_STEP_KEY])[0]))


class WeightsPublisher:
    """Publishes weights from a daemon thread, newest wins: a stuck insert never stalls training."""

    def __init__(self, address: str):
        self._client = reverb.Client(address)
        self._pending: PublishedWeights | None = None
        self._condition = threading.Condition()
        self._busy = False
        self.published_step = -1
        self.failures = 0
        threading.Thread(target=self._run, name="weights-publisher", daemon=True).start()

    def submit(self, variables: list[np.ndarray], train_step: int) -> None:
        """Queues weights for publishing (replacing any not yet sent); returns immediately."""
        with self._condition:
            self._pending = PublishedWeights(variables, train_step)
            self._condition.notify()

    def wait_idle(self, timeout_s: float) -> bool:
        """Waits until everything submitted was published; False on timeout."""
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
                publish_weights(self._client, weights.variables, weights.train_step)
                self.published_step = weights.train_step
            except Exception as error:  # noqa: BLE001 - keep training; the next publish retries
                self.failures += 1
                log.warning("publishing weights of step %d failed: %s", weights.train_step, error)
            with self._condition:
                self._busy = False
                self._condition.notify_all()


class WeightsPuller:
    """Fetches the latest published weights on a daemon thread; the caller never blocks.

    `latest()` returns the newest weights not yet handed out (or None). `status` says what the
    puller is doing ("waiting for first weights", "replay unreachable", "ok").
    """

    def __init__(self, address: str, timeout_s: float, min_interval_s: float = 0.5):
        self._address = address
        self._timeout_s = timeout_s
        self._min_interval_s = min_interval_s
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._latest: PublishedWeights | None = None
        self._last_step = -1
        self.status = "waiting for first weights"
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="weights-puller", daemon=True)
        self._thread.start()
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
        """Stops the thread (a call stuck in Reverb is abandoned with the daemon thread)."""
        self._stop.set()
        self._wanted.set()

    def _run(self) -> None:
        client = reverb.Client(self._address)
        while not self._stop.is_set():
            self._wanted.wait()
            self._wanted.clear()
            if self._stop.is_set():
                return
            try:
                info = server_info(client, self._timeout_s)[VARIABLES_TABLE]
                if info.current_size == 0:
                    self.status = "waiting for first weights"
                    self._wanted.set()  # keep polling until the learner publishes
                else:
                    weights = _sample_weights(client)
                    self.status = "ok"
                    if weights.train_step != self._last_step:
                        self._last_step = weights.train_step
                        with self._lock:
                            self._latest = weights
            except Exception as error:  # noqa: BLE001 - any failure keeps the current weights and retries
                self.failures += 1
                self.status = "replay unreachable"
                log.warning("weight refresh from %s failed (%s); keeping current weights", self._address,
                            type(error).__name__)
                self._wanted.set()
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
