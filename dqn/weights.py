"""Policy weights through the `variables` table: publishing (learner) and pulling (actors, evaluator).

Reverb 0.14 puts no deadline on `insert` or `sample` (a sample on an empty table or a dead server
waits forever). Every such call here runs on a daemon thread under a deadline (`DeadlineCaller`):
the caller's loop never blocks, a stuck call is abandoned, and the next attempt uses a fresh client.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import reverb
import tensorflow as tf

from dqn.agent import POLICY_VARIABLES_KEY, TRAIN_STEP_KEY
from dqn.host import HostInput, HostOutput
from dqn.replay import VARIABLES_TABLE, server_info

log = logging.getLogger(__name__)


class CallTimeout(TimeoutError):
    """A remote call did not finish within its deadline (it was abandoned on its thread)."""


class DeadlineCaller:
    """Runs calls on a reused daemon worker thread with a deadline; at most one abandoned call lingers at a time.

    One long-lived worker, not a thread per call: a new thread several times a second kept ~290 B of the learner's
    memory per weight publication (measured in a /tmp probe, 0.1 MiB/min at 360 publications/min; glibc spreading
    short-lived threads over its malloc arenas is the likely cause, not verified). A worker whose call overran
    its deadline is abandoned and a new one takes the next call once the stuck one has finished.
    """

    def __init__(self) -> None:
        self._worker: _Worker | None = None
        self._stuck: _Worker | None = None

    def call(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """fn() or CallTimeout; re-raises fn's own exception."""
        if self._stuck is not None:
            if self._stuck.busy.is_set():
                raise CallTimeout("the previous call is still stuck")
            self._stuck = None
        if self._worker is None:
            self._worker = _Worker()
        worker = self._worker
        done = worker.submit(fn)
        if not done.wait(timeout_s):
            self._stuck, self._worker = worker, None
            worker.retire()  # it exits once its stuck call returns
            raise CallTimeout(f"no answer within {timeout_s:.0f} s")
        if "error" in worker.outcome:
            raise worker.outcome["error"]
        return worker.outcome.get("value")


class _Worker:
    """A daemon thread running one submitted call at a time (for DeadlineCaller)."""

    def __init__(self) -> None:
        self.busy = threading.Event()
        self.outcome: dict[str, Any] = {}
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="remote-call", daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> threading.Event:
        """Starts fn(); the returned event is set when it has finished (outcome in `outcome`)."""
        done = threading.Event()
        self.outcome = {}
        self.busy.set()
        self._calls.put((fn, done))
        return done

    def retire(self) -> None:
        """Ends the thread after its current call."""
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, done = item
            try:
                self.outcome["value"] = fn()
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                self.outcome["error"] = error
            self.busy.clear()
            done.set()


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


def sample_weights(client: reverb.Client) -> PublishedWeights:
    """The current `variables` item (blocks while the table is empty: call under a deadline)."""
    sample = next(client.sample(VARIABLES_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
    # Items written with `insert` are one timestep long: drop that leading axis.
    return PublishedWeights([np.asarray(v)[0] for v in sample.data[POLICY_VARIABLES_KEY]],
                            int(np.asarray(sample.data[TRAIN_STEP_KEY])[0]))


class FlatWeights:
    """Reads or assigns a list of same-dtype variables as one flat vector, in one graph call.

    Why: on Python 3.11 + TF 2.15 every tensor passed between Python and TF keeps a little memory for good
    (tensorflow/tensorflow#62551). Measured per call on the default network (6 variables): reading them one by
    one kept ~580 B, assigning them one by one ~310 B, one flat vector as argument or result ~48 B; moved through
    `dqn.host` (numpy in and out inside the graph) 0 B. Weights are read or assigned several times a second for
    the whole run. Calls are serialized by a lock (the host buffers are shared).
    """

    def __init__(self, variables: list):
        self._variables = list(variables)
        dtypes = {v.dtype for v in self._variables}
        if len(dtypes) != 1:
            raise ValueError(f"FlatWeights needs variables of one dtype; got {sorted(d.name for d in dtypes)}")
        self._shapes = [tuple(v.shape) for v in self._variables]
        self._sizes = [int(np.prod(shape)) for shape in self._shapes]
        self._offsets = np.cumsum(self._sizes)[:-1]  # where each variable starts in the flat vector, after the first
        dtype = self._variables[0].dtype
        self._lock = threading.Lock()
        self._incoming = HostInput([sum(self._sizes)], dtype)
        self._outgoing = HostOutput([sum(self._sizes)], dtype)
        self._read = tf.function(self._read_flat, autograph=False)
        self._assign = tf.function(self._assign_flat, autograph=False)

    @property
    def shapes(self) -> list[tuple]:
        """Each variable's shape, in order."""
        return list(self._shapes)

    def read(self) -> list[np.ndarray]:
        """The variables' current values (views into one new array, so callers may keep them)."""
        with self._lock:
            self._read()
            flat = self._outgoing.value.copy()
        return [part.reshape(shape) for part, shape in zip(np.split(flat, self._offsets), self._shapes, strict=True)]

    def assign(self, values: list[np.ndarray]) -> None:
        """Sets every variable from `values` (same order and shapes as the variables)."""
        flat = np.concatenate([np.asarray(value).ravel() for value in values])
        with self._lock:
            self._incoming.set(flat)
            self._assign()

    def _read_flat(self):
        self._outgoing.write(tf.concat([tf.reshape(v, [-1]) for v in self._variables], axis=0))

    def _assign_flat(self):
        parts = tf.split(self._incoming.read(), self._sizes)
        for variable, part in zip(self._variables, parts, strict=True):
            variable.assign(tf.reshape(part, variable.shape))


class WeightsPublisher:
    """Publishes weights from a daemon thread, newest wins: a stuck insert never stalls training."""

    def __init__(self, address: str, timeout_s: float):
        self._address = address
        self._timeout_s = timeout_s
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
                caller.call(lambda w=weights, c=client: publish_weights(c, w.variables, w.train_step), self._timeout_s)
                self.published_step = weights.train_step
            except Exception as error:  # noqa: BLE001 - keep training; the next publish retries
                self.failures += 1
                if isinstance(error, CallTimeout):
                    client = reverb.Client(self._address)
                log.warning("publishing weights of step %d failed (%s); the next publish retries",
                            weights.train_step, error)
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

    def _fetch(self, client: reverb.Client) -> PublishedWeights | None:
        if server_info(client, self._timeout_s)[VARIABLES_TABLE].current_size == 0:
            return None
        return sample_weights(client)

    def _run(self) -> None:
        caller, client = DeadlineCaller(), reverb.Client(self._address)
        while not self._stop.is_set():
            self._wanted.wait()
            self._wanted.clear()
            if self._stop.is_set():
                return
            try:
                weights = caller.call(lambda c=client: self._fetch(c), self._timeout_s)
            except Exception as error:  # noqa: BLE001 - any failure keeps the current weights and retries
                self.failures += 1
                self.status = "replay unreachable"
                if isinstance(error, CallTimeout):
                    client = reverb.Client(self._address)
                log.warning("weight refresh from %s failed (%s); keeping current weights", self._address, error)
                self._wanted.set()
            else:
                if weights is None:
                    self.status = "waiting for first weights"
                    self._wanted.set()  # keep polling until the learner publishes
                else:
                    self.status = "ok"
                    if weights.train_step != self._last_step:
                        self._last_step = weights.train_step
                        with self._lock:
                            self._latest = weights
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
