"""Replay batches the learner does not train on: counted, their bad items deleted, one log line a minute at most.

The feed (learner/staged_batches.py) finds bad items with dqn/replay_layout/item_checks.py and never hands their
batch out. Deleting the items matters as much as skipping them: left in the table they are sampled again, and
while a learner is down its rate limiter stops inserts, so FIFO removal would never reach them.
"""

from __future__ import annotations

import logging

import numpy as np

from dqn.process.log_throttle import LogThrottle
from dqn.remote.connection import RemoteConnection
from dqn.replay_layout.item_checks import describe
from dqn.replay_layout.items import REPLAY_TABLE

log = logging.getLogger("learner")

#: A stream of bad batches logs one line this often.
LOG_INTERVAL_S = 60.0
#: Keys already deleted that are remembered: batches sampled before a deletion still hold the key.
REMEMBERED_KEYS = 4096


class BadBatches:
    """What the feed calls for a bad or unreadable batch (on its thread); counts what it skipped and deleted."""

    def __init__(self, address: str, timeout_s: float):
        self.connection = RemoteConnection(address, timeout_s, "deleting bad replay items")
        self._log = LogThrottle(LOG_INTERVAL_S)
        self.skipped = 0  # batches not trained on
        self.deleted = 0  # bad items deleted from the replay table (each once)
        self._deleted_keys: dict[int, None] = {}  # the latest REMEMBERED_KEYS of them, oldest first

    def reject(self, keys: np.ndarray, codes: np.ndarray) -> None:
        """A batch whose items with a non-zero code are bad: deletes those keys (under a deadline) and counts it."""
        self.skipped += 1
        # A batch samples with replacement, so one bad item may appear in it more than once.
        bad = [key for key in dict.fromkeys(np.asarray(keys)[np.asarray(codes) != 0].astype(np.uint64).tolist())
               if key not in self._deleted_keys]
        try:
            if bad:
                self.connection.call(lambda c: c.mutate_priorities(REPLAY_TABLE, deletes=bad))
        except Exception as error:  # noqa: BLE001 - the next sample of an item left in the table finds it again
            outcome = f"could not delete them ({type(error).__name__}); a later sample finds them again"
        else:
            self.deleted += len(bad)
            for key in bad:
                self._deleted_keys[key] = None
            while len(self._deleted_keys) > REMEMBERED_KEYS:
                del self._deleted_keys[next(iter(self._deleted_keys))]
            outcome = "deleted them from the replay table"
        if self._log.ready():
            log.warning("skipped a replay batch holding %s; %s (%d batch(es) skipped, %d item(s) deleted so far; "
                        "logged at most once a minute)", describe(np.asarray(codes)), outcome, self.skipped,
                        self.deleted)

    def unreadable(self, error: Exception) -> None:
        """A batch Reverb's sampler could not read: an item of other shapes or dtypes than the table signature's.

        The sampler drops such an item without naming its key, so it cannot be deleted here; it is skipped each time
        it is sampled, and FIFO removal reaches it as the actors keep inserting (the learner keeps sampling).
        """
        self.skipped += 1
        if self._log.ready():
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            reason = next((line for line in lines if "incompatible" in line or "Inconsistent" in line),
                          lines[-1] if lines else type(error).__name__)
            log.warning("skipped a replay batch Reverb could not read (%s); the item is left to FIFO removal (%d "
                        "batch(es) skipped so far; logged at most once a minute)", reason, self.skipped)
