"""Which control items a role trusts: signatures under the optional shared key, and the weights' train-step rule.

Anyone who reaches the control server's port can insert a `variables` or `learner_requests` item. Two defences:

- With `shared_key` set on every role, the learner signs the weights it publishes and the evaluator its reset
  requests (HMAC-SHA256 over every field and a tag naming the kind of item, so one kind's signature never
  validates another); readers refuse items that are unsigned or signed with another key. Without a key, items
  carry an empty signature and readers accept them. A signed item can still be inserted again later (a replay):
  the train-step rules below and the learner's rule for reset requests (learner/triggers.py) bound what that does.
- Whatever the key, `implausible_weights` refuses weights whose train step no real learner could have reached.

Refused items are counted and logged at most once a minute per reader (`Refusals`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
from collections.abc import Iterable

import numpy as np

from dqn.process.log_throttle import LogThrottle

log = logging.getLogger(__name__)

_WEIGHTS_TAG = b"dqn-service variables item v1"
_RESET_REQUEST_TAG = b"dqn-service learner_requests item v1"

#: The train-step rule of `implausible_weights`. A learner's every SGD step samples a batch from Reverb, so no
#: learner trains anywhere near this many steps a second...
MAX_TRAIN_STEPS_PER_S = 50_000
#: ...and between its own publications it trains at most a publish interval (plus what it trains while a publication
#: waits out its deadline), far below this allowance.
TRAIN_STEP_ALLOWANCE = 100_000


class ItemSigner:
    """Signs and checks control items with the shared key; without a key it signs nothing and accepts everything."""

    def __init__(self, key: str | None):
        self._key = key.encode("utf-8") if key else None

    @property
    def signing(self) -> bool:
        """True when a shared key is set (items are signed and checked)."""
        return self._key is not None

    def weights(self, variables: Iterable[np.ndarray], train_step: int, exploration_start: int) -> bytes:
        """The signature of a `variables` item (empty without a key)."""
        parts = [np.int64(train_step).tobytes(), np.int64(exploration_start).tobytes()]
        for variable in variables:
            array = np.ascontiguousarray(variable)
            parts += [f"{array.dtype.str}{array.shape}".encode(), array.tobytes()]
        return self._mac(_WEIGHTS_TAG, parts)

    def reset_request(self, train_step: int) -> bytes:
        """The signature of a `learner_requests` item (empty without a key)."""
        return self._mac(_RESET_REQUEST_TAG, [np.int64(train_step).tobytes()])

    def refusal(self, signature: bytes, expected: bytes) -> str | None:
        """Why an item with `signature` is refused when `expected` is its right signature; None if it is accepted."""
        if self._key is None:
            return None
        if not signature:
            return "unsigned (the shared key is set here: set DQN_SHARED_KEY on every role)"
        if not hmac.compare_digest(bytes(signature), expected):
            return "signed with another key, or altered"
        return None

    def _mac(self, tag: bytes, parts: list[bytes]) -> bytes:
        if self._key is None:
            return b""
        mac = hmac.new(self._key, tag, hashlib.sha256)
        for part in parts:  # each part length-prefixed: no two sequences of parts hash the same bytes
            mac.update(len(part).to_bytes(8, "little"))
            mac.update(part)
        # Hex: a tf.string made from numpy bytes loses trailing NUL bytes, which a raw digest may end with.
        return mac.hexdigest().encode("ascii")


@dataclasses.dataclass(frozen=True)
class AcceptedStep:
    """The train step of the last weights a reader accepted, and when (time.monotonic()) it fetched them."""

    train_step: int
    at: float


def implausible_weights(train_step: int, exploration_start: int, last: AcceptedStep | None,
                        now: float) -> str | None:
    """Why weights of `train_step` cannot come from the run's learner, given the last accepted; None if they can.

    Refused: a negative step, an exploration start outside [0, train_step] (the learner sets it to its own step
    at a reset), and a step further past the last accepted one than MAX_TRAIN_STEPS_PER_S times the seconds since
    plus TRAIN_STEP_ALLOWANCE. A real learner never trips it: it publishes as it trains, so the newest weights a
    reader fetched were at most a publish interval behind the learner then. A step going back is accepted: a
    restarted learner resumes from its last checkpoint and a roll-back restores an older one. The first weights a
    reader sees have nothing to be compared with; the shared key covers those.
    """
    if train_step < 0:
        return "a negative train step"
    if not 0 <= exploration_start <= train_step:
        return f"its exploration start {exploration_start} lies outside [0, its train step]"
    if last is None or train_step <= last.train_step:
        return None
    limit = last.train_step + MAX_TRAIN_STEPS_PER_S * max(0.0, now - last.at) + TRAIN_STEP_ALLOWANCE
    if train_step > limit:
        return (f"{train_step - last.train_step} steps past the last accepted ({last.train_step}, "
                f"{now - last.at:.0f} s before): no learner trains that fast")
    return None


class Refusals:
    """Counts the control items a reader refused; logs one warning a minute naming the latest reason."""

    def __init__(self, what: str, interval_s: float = 60.0):
        self._what = what
        self._log = LogThrottle(interval_s)
        self.count = 0

    def refuse(self, reason: str) -> None:
        """Counts one refused item and logs why, if a warning is due."""
        self.count += 1
        if self._log.ready():
            log.warning("refused a %s: %s (%d refused so far; logged at most once a minute)", self._what, reason,
                        self.count)
