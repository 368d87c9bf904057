"""Role reports: what each role publishes every few seconds, the checks one from the network must pass, and windows.

A report holds cumulative counters since the role's process started (env steps, seconds spent in env steps,
seconds held back by the replay server, ...), the process's CPU seconds and time kept from a core, and its machine.
Cumulative counters make a lost report harmless and let the reader choose the window: the rates of a window are
the differences between the newest report of a role and one about a window older, divided by the role's own
clock (so clocks of different machines never mix).

Reports arrive from the network: anything that is not a small JSON object of known fields with finite numbers in
range is refused (`BadReport`), and a report is never used for anything but the verdict.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Any

#: Longest report text accepted, in bytes: a report is a few hundred bytes, so anything larger is not one.
MAX_REPORT_BYTES = 2048
#: Largest number accepted in a report (counters of a long run stay far below it).
MAX_VALUE = 1e15
#: Per role: its counters, and which of them are levels (read as they are) rather than totals (read as rates).
COUNTERS = {
    "actor": ("env_steps", "env_s", "policy_s", "write_s", "held_s", "weights_s", "no_weights_s", "downloads",
              "download_s", "download_bytes"),
    "learner": ("sgd_steps", "train_s", "data_wait_s"),
    "evaluator": ("busy_s", "evaluations"),
}
LEVELS = {
    "actor": ("num_envs", "weights_step", "warming_up"),
    "learner": ("train_step", "batch", "publish_interval", "samples_per_insert", "finished"),
    "evaluator": (),
}


class BadReport(ValueError):
    """A report that is not one this service writes (too large, not JSON, a field missing, out of range)."""


@dataclasses.dataclass(frozen=True)
class RoleReport:
    """One role's report: who sent it, its process's cumulative usage, its machine, its counters."""

    role: str
    id: str
    instance: str  # one per process start
    host: str
    cores: float
    load1: float | None
    wall: float  # the sender's clock (time.time()) when it sent the report
    clock_s: float  # the sender's monotonic clock
    cpu_s: float
    waited_s: float | None  # on a run queue
    throttled_s: float | None  # by a CPU quota
    counters: dict[str, float]

    @property
    def key(self) -> tuple[str, str]:
        """(role, id): one history per role instance."""
        return self.role, self.id

    def to_json(self) -> str:
        """The report as the JSON text that travels."""
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))


def _number(value: Any, name: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReport(f"{name} is not a number")
    if not math.isfinite(value) or abs(value) > MAX_VALUE:
        raise BadReport(f"{name} is not finite or out of range")
    return float(value)


def _text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise BadReport(f"{name} is not a short text")
    return value


def parse_report(data: bytes | str) -> RoleReport:
    """The report in `data`, checked; BadReport naming what is wrong otherwise."""
    if len(data) > MAX_REPORT_BYTES:
        raise BadReport(f"{len(data)} bytes, more than {MAX_REPORT_BYTES}")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise BadReport("not JSON") from None
    if not isinstance(value, dict):
        raise BadReport("not a JSON object")
    role = value.get("role")
    if role not in COUNTERS:
        raise BadReport(f"unknown role {str(role)[:20]!r}")
    counters = value.get("counters")
    if not isinstance(counters, dict):
        raise BadReport("no counters")
    checked = {name: _number(counters.get(name), name) for name in (*COUNTERS[role], *LEVELS[role])}
    if any(checked[name] < 0 for name in COUNTERS[role]):
        raise BadReport("a counter is negative")
    report = RoleReport(
        role=role, id=_text(value.get("id"), "id", 32), instance=_text(value.get("instance"), "instance", 32),
        host=_text(value.get("host"), "host", 64), cores=_number(value.get("cores"), "cores"),
        load1=_number(value.get("load1"), "load1", optional=True), wall=_number(value.get("wall"), "wall"),
        clock_s=_number(value.get("clock_s"), "clock_s"), cpu_s=_number(value.get("cpu_s"), "cpu_s"),
        waited_s=_number(value.get("waited_s"), "waited_s", optional=True),
        throttled_s=_number(value.get("throttled_s"), "throttled_s", optional=True), counters=checked)
    if report.cores <= 0 or report.clock_s < 0 or report.cpu_s < 0:
        raise BadReport("cores, clock_s or cpu_s out of range")
    return report


@dataclasses.dataclass(frozen=True)
class RoleWindow:
    """One role over a window: CPU cores used, its share of wanted CPU it did not get, counters per second."""

    role: str
    id: str
    host: str
    cores: float
    load1: float | None
    seconds: float
    wall: float  # the newest report's sender clock
    cpu: float  # cores used on average
    starved: float | None  # kept from a core / (used + kept): 0 = never waited for a core, 1 = never ran
    throttled: float | None  # share of the window its CPU quota held it back
    rates: dict[str, float]  # totals' differences per second
    levels: dict[str, float]  # the newest report's levels

    def rate(self, name: str) -> float:
        """Counter `name` per second over the window (0 where the role does not count it)."""
        return self.rates.get(name, 0.0)

    def share(self, name: str) -> float:
        """Seconds counter `name` per second of the window, within [0, 1]."""
        return min(1.0, max(0.0, self.rate(name)))

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> RoleWindow:
        """A window from its `dataclasses.asdict` form (recorded windows in tests and in the verdict item)."""
        return cls(**value)


def role_window(first: RoleReport, last: RoleReport) -> RoleWindow | None:
    """The window between two reports of one process; None if they are too close in time to say anything."""
    seconds = last.clock_s - first.clock_s
    if seconds < 0.5:
        return None
    rates = {name: (last.counters[name] - first.counters[name]) / seconds for name in COUNTERS[last.role]}
    levels = {name: last.counters[name] for name in LEVELS[last.role]}
    return RoleWindow(last.role, last.id, last.host, last.cores, last.load1, seconds, last.wall,
                      max(0.0, last.cpu_s - first.cpu_s) / seconds, *_kept(first, last, seconds), rates, levels)


def _kept(first, last, seconds: float) -> tuple[float | None, float | None]:
    """(starved, throttled) of a process between two readings of its usage (a report or a server snapshot)."""
    waited = None if first.waited_s is None or last.waited_s is None else max(0.0, last.waited_s - first.waited_s)
    throttled = (None if first.throttled_s is None or last.throttled_s is None
                 else max(0.0, last.throttled_s - first.throttled_s))
    if waited is None and throttled is None:
        return None, None
    used, kept = max(0.0, last.cpu_s - first.cpu_s), (waited or 0.0) + (throttled or 0.0)
    return (kept / (used + kept) if used + kept > 0 else 0.0,
            None if throttled is None else min(1.0, throttled / seconds))


class ReportHistory:
    """The recent reports of every role instance, by arrival time; windows of the last `window_s` seconds.

    A role judged on its first seconds would be judged on its start (tracing its graphs, filling the replay), so
    an instance is windowed only once it has reported for `settle_s`. A restarted role (another instance, or
    counters that went back) starts a new history; one silent for `stale_s` is forgotten, so a scaled-down actor
    leaves the verdict.
    """

    def __init__(self, window_s: float, stale_s: float, settle_s: float):
        self.window_s, self.stale_s, self.settle_s = window_s, stale_s, settle_s
        self._reports: dict[tuple[str, str], collections.deque] = {}
        self._first_seen: dict[tuple[str, str], float] = {}

    def add(self, report: RoleReport, now: float) -> None:
        """Keeps `report`, which arrived at `now` (the reader's monotonic clock)."""
        history = self._reports.setdefault(report.key, collections.deque())
        if history and _restarted(history[-1][1], report):
            history.clear()
        if not history:
            self._first_seen[report.key] = now
        history.append((now, report))
        while len(history) > 2 and history[1][0] <= now - self.window_s:
            history.popleft()

    def windows(self, now: float) -> list[RoleWindow]:
        """One window per live, settled role instance with two reports at least half a window apart."""
        windows = []
        for key in list(self._reports):
            history = self._reports[key]
            if now - history[-1][0] > self.stale_s:
                del self._reports[key], self._first_seen[key]
                continue
            first, last = history[0][1], history[-1][1]
            if now - self._first_seen[key] < self.settle_s or last.clock_s - first.clock_s < self.window_s / 2:
                continue
            window = role_window(first, last)
            if window is not None:
                windows.append(window)
        return windows


def _restarted(before: RoleReport, after: RoleReport) -> bool:
    """`after` comes from a new process of the same role, or one whose counters went back."""
    if before.instance != after.instance or after.clock_s < before.clock_s:
        return True
    return any(after.counters[name] < before.counters[name] for name in COUNTERS[after.role])


@dataclasses.dataclass(frozen=True)
class ServerSnapshot:
    """The replay server's own cumulative figures at one moment (read by the process that serves the tables)."""

    clock_s: float
    cpu_s: float
    waited_s: float | None
    throttled_s: float | None
    inserts: int  # replay items inserted
    samples: int  # replay items sampled
    worker_ms: dict[str, int]  # the replay table worker's time by activity (Reverb's TableWorkerTime)
    pulls: int  # weight downloads served (variables table samples)
    publications: int  # weight publications (variables table inserts)
    size: int = 0  # replay items held
    min_size: int = 0  # replay items the learner waits for before its first sample


@dataclasses.dataclass(frozen=True)
class ServerWindow:
    """The replay server over a window: its CPU, its table worker's time by activity, rates in transitions/s."""

    host: str
    cores: float
    load1: float | None
    seconds: float
    cpu: float
    starved: float | None
    throttled: float | None
    inserts_per_s: float  # transitions
    samples_per_s: float  # transitions
    worker: dict[str, float]  # share of the window: busy, idle, inserts_held, samples_held
    pulls_per_s: float
    publications_per_s: float
    filling: str = ""  # "<size> of <min_size> items" while the replay table is below the learner's minimum

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> ServerWindow:
        """A window from its `dataclasses.asdict` form."""
        return cls(**value)


def server_window(first: ServerSnapshot, last: ServerSnapshot, transitions_per_item: int, host: str, cores: float,
                  load1: float | None) -> ServerWindow | None:
    """The server's window between two snapshots, None if they are too close in time."""
    seconds = last.clock_s - first.clock_s
    if seconds < 0.5:
        return None
    worked = {name: max(0, last.worker_ms.get(name, 0) - first.worker_ms.get(name, 0)) / 1000 / seconds
              for name in last.worker_ms}
    worker = {"busy": min(1.0, worked.get("running_ms", 0.0) + worked.get("sampling_ms", 0.0)
                          + worked.get("inserting_ms", 0.0)),
              "idle": min(1.0, worked.get("sleeping_ms", 0.0)),
              # Inserts wait for samples: the rate limiter holds the actors back until the learner samples.
              "inserts_held": min(1.0, worked.get("waiting_for_sampling_ms", 0.0)),
              # Samples wait for inserts: the rate limiter holds the learner back until actors insert.
              "samples_held": min(1.0, worked.get("waiting_for_inserts_ms", 0.0))}
    return ServerWindow(host, cores, load1, seconds, max(0.0, last.cpu_s - first.cpu_s) / seconds,
                        *_kept(first, last, seconds),
                        (last.inserts - first.inserts) * transitions_per_item / seconds,
                        (last.samples - first.samples) * transitions_per_item / seconds, worker,
                        (last.pulls - first.pulls) / seconds, (last.publications - first.publications) / seconds,
                        f"{last.size} of {last.min_size} items" if last.size < last.min_size else "")
