"""Replay batches the learner does not train on: counted, their bad items deleted, one log line a minute at most.

The feed (learner/staged_batches.py) finds bad items with dqn/replay_layout/item_checks.py and never hands their
batch out. Deleting the items matters as much as skipping them: left in the table they are sampled again, and
while a learner is down its rate limiter stops inserts, so FIFO removal would never reach them.

An item of other shapes or dtypes than the table's signature (a client's plain `insert` can write one) is refused
by Reverb's dataset, which drops it without its key. Reverb's plain sampler hands such an item over with its key,
so each unreadable batch sets off a search: `SEARCH_SAMPLES` items sampled the plain way, and those whose tensors
do not fit the signature deleted. The sampler draws by priority as the dataset does, so the item that just broke a
batch is as likely to be drawn as it was then, and each further sighting searches again.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from dqn.process.log_throttle import LogThrottle
from dqn.remote.connection import RemoteConnection
from dqn.replay_layout.item_checks import describe
from dqn.replay_layout.items import REPLAY_TABLE

log = logging.getLogger("learner")

#: A stream of bad batches logs one line this often.
LOG_INTERVAL_S = 60.0
#: Keys already deleted that are remembered: batches sampled before a deletion still hold the key.
REMEMBERED_KEYS = 4096
#: Items sampled the plain way after an unreadable batch, to find the misfit among them (a few batches' worth).
SEARCH_SAMPLES = 1024


def misfit_keys(client, signature, samples: int = SEARCH_SAMPLES) -> list[int]:
    """Keys of replay items, among `samples` drawn by Reverb's plain sampler, whose tensors do not fit `signature`."""
    specs = tf.nest.flatten(signature)
    keys = []
    for sample in client.sample(REPLAY_TABLE, num_samples=samples, emit_timesteps=False):
        tensors = tf.nest.flatten(sample.data)
        fits = len(tensors) == len(specs) and all(
            np.asarray(tensor).dtype == spec.dtype.as_numpy_dtype and spec.shape.is_compatible_with(np.shape(tensor))
            for tensor, spec in zip(tensors, specs, strict=True))
        if not fits:
            keys.append(int(sample.info.key))
    return list(dict.fromkeys(keys))


class BadBatches:
    """What the feed calls for a bad or unreadable batch (on its thread); counts what it skipped and deleted."""

    def __init__(self, address: str, timeout_s: float, signature):
        self.connection = RemoteConnection(address, timeout_s, "deleting bad replay items")
        self._signature = signature  # the replay table's, to search for an unreadable item
        self._log = LogThrottle(LOG_INTERVAL_S)
        self.skipped = 0  # batches not trained on
        self.deleted = 0  # bad items deleted from the replay table (each once)
        self._deleted_keys: dict[int, None] = {}  # the latest REMEMBERED_KEYS of them, oldest first

    def reject(self, keys: np.ndarray, codes: np.ndarray) -> None:
        """A batch whose items with a non-zero code are bad: deletes those keys (under a deadline) and counts it."""
        self.skipped += 1
        # A batch samples with replacement, so one bad item may appear in it more than once.
        bad = np.asarray(keys)[np.asarray(codes) != 0].astype(np.uint64).tolist()
        outcome = self._delete(bad)
        if self._log.ready():
            log.warning("skipped a replay batch holding %s; %s (%d batch(es) skipped, %d item(s) deleted so far; "
                        "logged at most once a minute)", describe(np.asarray(codes)), outcome, self.skipped,
                        self.deleted)

    def unreadable(self, error: Exception) -> None:
        """A batch Reverb's dataset could not read: an item of other shapes or dtypes than the table signature's.

        The dataset drops such an item without its key; a search with the plain sampler finds and deletes it.
        """
        self.skipped += 1
        try:
            found = self.connection.call(lambda client: misfit_keys(client, self._signature))
        except Exception as search_error:  # noqa: BLE001 - the next unreadable batch searches again
            outcome = f"the search for it failed ({type(search_error).__name__}); the next sighting searches again"
        else:
            outcome = (self._delete(found) if found else
                       f"not among {SEARCH_SAMPLES} items sampled to find it; the next sighting searches again")
        if self._log.ready():
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            reason = next((line for line in lines if "incompatible" in line or "Inconsistent" in line),
                          lines[-1] if lines else type(error).__name__)
            log.warning("skipped a replay batch Reverb could not read (%s); %s (%d batch(es) skipped, %d item(s) "
                        "deleted so far; logged at most once a minute)", reason, outcome, self.skipped, self.deleted)

    def _delete(self, keys: list[int]) -> str:
        """Deletes the keys not deleted before (under a deadline), counts them; what happened, for the log line."""
        bad = [key for key in dict.fromkeys(keys) if key not in self._deleted_keys]
        try:
            if bad:
                self.connection.call(lambda c: c.mutate_priorities(REPLAY_TABLE, deletes=bad))
        except Exception as error:  # noqa: BLE001 - the next sample of an item left in the table finds it again
            return f"could not delete them ({type(error).__name__}); a later sample finds them again"
        self.deleted += len(bad)
        for key in bad:
            self._deleted_keys[key] = None
        while len(self._deleted_keys) > REMEMBERED_KEYS:
            del self._deleted_keys[next(iter(self._deleted_keys))]
        return "deleted them from the replay table"
