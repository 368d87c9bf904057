"""One remote address for one worker loop: its Reverb client, the deadline of each call, reconnects, warnings.

Every loop that calls a Reverb server from a daemon thread (weights puller and publisher, reset requests, priority
updates) needs the same four things, so they live here and a loop says only what it calls and what a failure means
to it. A loop that retries every few milliseconds still logs one warning per interval, with a count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import reverb

from dqn.process.log_throttle import LogThrottle
from dqn.remote.deadline import DeadlineCaller

log = logging.getLogger(__name__)

#: A connection that keeps failing logs at most one warning this often.
WARN_INTERVAL_S = 60.0

T = TypeVar("T")


class RemoteConnection:
    """Calls `fn(client)` on the server at `address` under a deadline; a failed call drops the client.

    Failures are counted and re-raised for the loop to decide what to keep and when to retry. A failure logs one
    warning per `warn_interval_s` naming how many calls failed since the last one; the first call that works after
    failures logs one line saying so. `purpose` names the calls in those lines ("weight refresh").
    """

    def __init__(self, address: str, timeout_s: float, purpose: str, *, client: reverb.Client | None = None,
                 warn_interval_s: float = WARN_INTERVAL_S):
        self.address, self.timeout_s, self.purpose = address, timeout_s, purpose
        self._client = client
        self._caller = DeadlineCaller()
        self._warnings = LogThrottle(warn_interval_s)
        self.failures = 0  # every failed call so far
        self._unreported = 0  # failed calls since the last warning
        self._outage = 0  # failed calls since the last call that worked

    @property
    def client(self) -> reverb.Client:
        """The current client; a new one after a failure (a stuck call keeps the old one)."""
        if self._client is None:
            self._client = reverb.Client(self.address)
        return self._client

    @property
    def failing(self) -> bool:
        """True from a failed call until the next call that works."""
        return self._outage > 0

    def call(self, fn: Callable[[reverb.Client], T]) -> T:
        """fn(client) within timeout_s; on any failure (CallTimeout included) counts it, warns if due, re-raises."""
        client = self.client
        try:
            result = self._caller.call(lambda: fn(client), self.timeout_s)
        except Exception as error:
            self._failed(error)
            raise
        if self._outage:
            log.info("%s works again at %s after %d failed call(s)", self.purpose, self.address, self._outage)
            self._outage = self._unreported = 0
        return result

    def _failed(self, error: Exception) -> None:
        # A fresh channel for the next call: the stuck call, if any, keeps the old one.
        self._client = None
        self.failures += 1
        self._outage += 1
        self._unreported += 1
        if self._warnings.ready():
            log.warning("%s failed at %s: %d failed call(s) since the last report, the last %s: %s; retrying",
                        self.purpose, self.address, self._unreported, type(error).__name__, error)
            self._unreported = 0
