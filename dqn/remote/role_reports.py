"""Role reports to the replay server and the verdict back, through the `role_reports` and `verdict` control tables.

Every role sends a small report every few seconds from a daemon thread (`RoleReporter`): one insert under the
connection's deadline, failures warned once a minute, nothing ever waits on it, and a role whose server lacks the
table (an older server) keeps working. The replay server drains the reports (`drain_reports`), judges the run
(dqn/bottleneck/) and publishes the verdict as one JSON item (`publish_verdict`), which `status`, `local` and anyone
else read (`fetch_verdict`) wherever the roles run: the verdict depends on no file of any role.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import reverb

from dqn.bottleneck.reports import RoleReport
from dqn.process.usage import machine, usage
from dqn.remote.connection import RemoteConnection
from dqn.remote.deadline import DeadlineCaller
from dqn.remote.replay_client import server_info
from dqn.replay_layout.items import REPORT_KEY, ROLE_REPORTS_TABLE, VERDICT_TABLE

#: Most reports read in one drain: at one report per role every few seconds this is hundreds of roles.
DRAIN_LIMIT = 1024
#: Longest verdict text read back, in bytes (the replay server bounds what it writes far below this).
MAX_VERDICT_BYTES = 64_000


class RoleReporter:
    """Sends `counters()` with this process's usage every `interval_s` from a daemon thread, under a deadline.

    `counters` runs on the reporter's thread: it must only read numbers the role keeps (a dict of floats).
    """

    def __init__(self, address: str, timeout_s: float, role: str, role_id: str,
                 counters: Callable[[], dict[str, float]], interval_s: float, machine_name: str = ""):
        self.connection = RemoteConnection(address, min(timeout_s, interval_s * 2), "role report")
        self._role, self._id, self._counters, self._interval_s = role, role_id, counters, interval_s
        self._machine_name = machine_name
        self._stop = threading.Event()
        # Tells a restarted role from the one before it: in a container every role may run as PID 1.
        self._instance = uuid.uuid4().hex[:12]
        self.sent = 0
        if interval_s > 0:
            threading.Thread(target=self._run, name="role-reports", daemon=True).start()

    def close(self) -> None:
        """Stops reporting (a call stuck in Reverb is abandoned with its daemon thread)."""
        self._stop.set()

    def report(self) -> RoleReport:
        """The report of this process, now."""
        # The counters and the clock they are divided by are read back to back: on a busy machine this thread may
        # wait long for a core between any two steps, and a counter read after a stale clock overstates its rate.
        counters = {name: float(value) for name, value in self._counters().items()}
        now, where = usage(), machine(self._machine_name)
        return RoleReport(self._role, self._id, self._instance, where.host, where.cores, where.load1, time.time(),
                          now.clock_s, now.cpu_s, now.waited_s, now.throttled_s, counters)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                item = {REPORT_KEY: np.array(self.report().to_json().encode(), dtype=object)}
                self.connection.call(lambda c, item=item: c.insert(item, priorities={ROLE_REPORTS_TABLE: 1.0}))
            except Exception:  # noqa: BLE001 - a report is never worth more than training; retried next interval
                continue
            self.sent += 1


def drain_reports(client: reverb.Client, timeout_s: float, caller: DeadlineCaller) -> list[bytes]:
    """Every report waiting in `role_reports` (up to DRAIN_LIMIT), each read once; [] when there is none."""
    info = server_info(client, timeout_s)
    if ROLE_REPORTS_TABLE not in info:
        raise LookupError(f"the server has no {ROLE_REPORTS_TABLE} table (a control server of an older version?)")
    waiting = info[ROLE_REPORTS_TABLE].current_size
    if waiting == 0:
        return []
    count = min(waiting, DRAIN_LIMIT)

    def sample() -> list[bytes]:
        texts = []
        for item in client.sample(ROLE_REPORTS_TABLE, count, emit_timesteps=False, unpack_as_table_signature=True):
            text = np.asarray(item.data[REPORT_KEY]).reshape(-1)[0]
            texts.append(text if isinstance(text, bytes) else str(text).encode())
        return texts

    return caller.call(sample, timeout_s)


def publish_verdict(client: reverb.Client, verdict: dict[str, Any], timeout_s: float, caller: DeadlineCaller) -> None:
    """Replaces the `verdict` item with `verdict` as JSON."""
    text = json.dumps(verdict, sort_keys=True).encode()
    caller.call(lambda: client.insert({REPORT_KEY: np.array(text, dtype=object)}, priorities={VERDICT_TABLE: 1.0}),
                timeout_s)


def fetch_verdict(client: reverb.Client, timeout_s: float,
                  caller: DeadlineCaller | None = None) -> dict[str, Any] | None:
    """The latest verdict, or None while there is none (or the server has no `verdict` table)."""
    info = server_info(client, timeout_s)
    if VERDICT_TABLE not in info or info[VERDICT_TABLE].current_size == 0:
        return None
    sample = (caller or DeadlineCaller()).call(
        lambda: next(client.sample(VERDICT_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True)), timeout_s)
    text = np.asarray(sample.data[REPORT_KEY]).reshape(-1)[0]
    if len(text) > MAX_VERDICT_BYTES:
        return None
    try:
        value = json.loads(text.decode() if isinstance(text, bytes) else str(text))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None
