"""The bottleneck verdict for `local`'s progress display, read from the replay server's `verdict` table.

`local` reads it where `dqn-service status` does, from the server, not from a file: the line a user sees on this
machine is the one a cluster's status shows. A daemon thread reads it every few seconds under a deadline, so the
progress loop never waits on the server.
"""

from __future__ import annotations

import threading

import reverb

from dqn.remote.deadline import DeadlineCaller
from dqn.remote.role_reports import fetch_verdict

#: Seconds between reads of the verdict (the server judges every report interval).
READ_INTERVAL_S = 5.0


def short_verdict(verdict: dict) -> str:
    """The part and the capacity figure that goes with it, short enough for the progress line."""
    part, figures = verdict.get("part", "?"), verdict.get("figures", {})
    if part == "warming up" or "actors_before_learner_binds" not in figures:
        return part
    return f"{part}, ≈{figures['actors_before_learner_binds']:.1f} actors keep the learner busy"


class LiveVerdict:
    """The latest verdict of the replay server at `address`, refreshed by a daemon thread."""

    def __init__(self, address: str, timeout_s: float = 3.0):
        self._address, self._timeout_s = address, timeout_s
        self._stop = threading.Event()
        self.latest: dict | None = None
        threading.Thread(target=self._run, name="verdict-reader", daemon=True).start()

    def close(self) -> None:
        """Stops reading."""
        self._stop.set()

    def _run(self) -> None:
        client, caller = None, DeadlineCaller()
        while not self._stop.wait(READ_INTERVAL_S):
            try:
                client = client or reverb.Client(self._address)
                verdict = fetch_verdict(client, self._timeout_s, caller)
            except Exception:  # noqa: BLE001 - the progress line shows the last verdict read; the next read retries
                client = None
                continue
            if verdict is not None:
                self.latest = verdict
