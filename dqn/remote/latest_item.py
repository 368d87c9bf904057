"""Reading a table that holds only its newest item (`variables`, `learner_requests`) without downloading it twice.

Asking costs one small `server_info` call; downloading costs the whole item (for `variables`, the whole network).
So readers may ask often, for a short lag whatever their speed, and download only when the table's insert count
moved since their last download.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reverb

from dqn.remote.replay_client import server_info

#: What `LatestItemReader.fetch` returns when nothing was inserted since its last download.
UNCHANGED = object()


class LatestItemReader:
    """Downloads a one-item table's item when it changed; remembers the insert count of the last download."""

    def __init__(self, table: str, timeout_s: float):
        self._table = table
        self._timeout_s = timeout_s
        self._last_inserts = -1

    def fetch(self, client: reverb.Client, download: Callable[[reverb.Client], Any]) -> Any:
        """`download(client)` if the item changed since the last call; None while empty; else `UNCHANGED`."""
        info = server_info(client, self._timeout_s)[self._table]
        if info.current_size == 0:
            return None
        inserts = info.rate_limiter_info.insert_stats.completed
        if inserts == self._last_inserts:
            return UNCHANGED
        item = download(client)
        self._last_inserts = inserts
        return item
