"""The replay server's bottleneck verdict: roles' reports in, the verdict out, every few seconds on a daemon thread.

Why here: every role already reaches the replay server, there is exactly one, it lives as long as the run, and it
reads its own tables' counters and its own CPU without a remote call. The learner, which is most often the part
that limits a run, does none of this work. The verdict goes to the `verdict` table (`dqn-service status`, `local`),
to TensorBoard under `verdict/` in the replay server's directory (scalars each time, the line as text when it
changes), to `verdict.json` there (for `local`, whose roles' ports are out of its reach, and `status --root-dir`)
and to the log when it changes. Reports are only read: nothing here changes training.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
import time
from typing import Any

import tensorflow as tf

from dqn.bottleneck.reports import BadReport, ReportHistory, ServerSnapshot, parse_report, server_window
from dqn.bottleneck.verdict import PARTS, Observation, judge
from dqn.files import atomic_write
from dqn.process.log_throttle import LogThrottle
from dqn.process.progress import VERDICT_FILE
from dqn.process.summaries import GraphScalars
from dqn.process.usage import machine, usage
from dqn.process.write_guard import WriteGuard
from dqn.remote.connection import RemoteConnection
from dqn.remote.deadline import DeadlineCaller
from dqn.remote.replay_client import server_info
from dqn.remote.role_reports import drain_reports, publish_verdict
from dqn.replay_layout.items import REPLAY_TABLE, VARIABLES_TABLE
from dqn.settings.config import ReplayServerConfig, role_dir

log = logging.getLogger("replay-server")

#: Seconds of reports each verdict is drawn from (at least three report intervals).
WINDOW_S = 10.0
#: Actors listed in the published verdict's observation; the verdict itself uses every one.
PUBLISHED_ACTORS = 32
#: A verdict that stays the same is logged and written as TensorBoard text this often.
REPEAT_S = 60.0
#: Rounds in a row a new part must be judged before it replaces the published one: a window that straddles a
#: change (a role starting, a burst) can read as a part for one round.
CONFIRM_ROUNDS = 2


class VerdictWatch:
    """Drains reports, judges the run and publishes the verdict every report interval until `stop`."""

    def __init__(self, client, config: ReplayServerConfig, transitions_per_item: int, writer, stop: threading.Event):
        self._local = client  # this process's own server: its tables' counters
        self._config = config
        self._per_item = transitions_per_item
        self._interval_s = config.report_interval_s
        self._window_s = max(WINDOW_S, 3 * self._interval_s)
        self._history = ReportHistory(self._window_s, stale_s=3 * self._window_s, settle_s=1.5 * self._window_s)
        self._snapshots: collections.deque = collections.deque()
        # The reports and the verdict are control tables: this server's own, unless control_address names another.
        # Never replay_address: that is how other roles reach a server, not necessarily this one.
        own = f"localhost:{config.port}"
        self._control = RemoteConnection(config.control_address or own, config.rpc_timeout_s, "role reports",
                                         client=None if config.control_address else client)
        self._caller = DeadlineCaller()
        self._writer, self._scalars = writer, GraphScalars(writer)
        self._file = config.path(role_dir("replay-server"), VERDICT_FILE)
        self._try_write = WriteGuard("replay-server")
        self._stop = stop
        self._refused = LogThrottle(REPEAT_S)
        self._failed = LogThrottle(REPEAT_S)
        self._repeat = LogThrottle(REPEAT_S)
        self._last_part: str | None = None
        self._new_part: tuple[str, int] = ("", 0)  # a part judged but not yet published, and in how many rounds
        self.latest: dict[str, Any] | None = None

    def start(self) -> None:
        """Starts the daemon thread (no thread when reports are off: report_interval_s 0)."""
        if self._interval_s > 0:
            threading.Thread(target=self._run, name="verdict", daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.step(time.monotonic())
            except Exception as error:  # noqa: BLE001 - the verdict must never take the server down
                if self._failed.ready():
                    log.warning("bottleneck verdict skipped (%s: %s); retrying every %.0f s, warning once a minute",
                                type(error).__name__, error, self._interval_s)

    def step(self, now: float) -> dict[str, Any] | None:
        """One round: read reports and counters, judge, publish. The published verdict, or None without one."""
        self._read_reports(now)
        self._snapshots.append((now, self._snapshot()))
        while len(self._snapshots) > 2 and self._snapshots[1][0] <= now - self._window_s:
            self._snapshots.popleft()
        observation = self._observation(now)
        verdict = judge(observation)
        if not self._confirmed(verdict.part):
            return self.latest
        published = {"part": verdict.part, "line": verdict.line(), "why": verdict.why, "change": verdict.change,
                     "evidence": verdict.evidence, "figures": verdict.figures, "time": time.time(),
                     "window_s": self._window_s,
                     "observation": {**observation.to_dict(),
                                     "actors": observation.to_dict()["actors"][:PUBLISHED_ACTORS]}}
        self._control.call(lambda client: publish_verdict(client, published, self._config.rpc_timeout_s,
                                                          self._caller))
        self._record(verdict, observation)
        self._try_write("verdict file", self._write_file, published)
        self.latest = published
        return published

    def _write_file(self, published: dict[str, Any]) -> None:
        os.makedirs(os.path.dirname(self._file), exist_ok=True)
        with atomic_write(self._file, durable=False) as handle:
            json.dump(published, handle)

    def _confirmed(self, part: str) -> bool:
        """True if `part` is the published part, or has now been judged CONFIRM_ROUNDS rounds in a row."""
        if self.latest is None or part == self.latest["part"]:
            self._new_part = ("", 0)
            return True
        rounds = self._new_part[1] + 1 if self._new_part[0] == part else 1
        self._new_part = (part, rounds)
        return rounds >= CONFIRM_ROUNDS

    def _read_reports(self, now: float) -> None:
        texts = self._control.call(lambda client: drain_reports(client, self._config.rpc_timeout_s, self._caller))
        refused: list[str] = []
        for text in texts:
            try:
                self._history.add(parse_report(text), now)
            except BadReport as error:
                refused.append(str(error))
        if refused and self._refused.ready():
            log.warning("refused %d role report(s) that are not this service's (the last: %s); they are ignored",
                        len(refused), refused[-1])

    def _snapshot(self) -> ServerSnapshot:
        info = server_info(self._local, self._config.rpc_timeout_s)
        replay, variables = info[REPLAY_TABLE], info[VARIABLES_TABLE]
        worker = replay.table_worker_time
        fields = ("running_ms", "sampling_ms", "inserting_ms", "sleeping_ms", "waiting_for_sampling_ms",
                  "waiting_for_inserts_ms")
        now = usage()
        return ServerSnapshot(now.clock_s, now.cpu_s, now.waited_s, now.throttled_s,
                              replay.rate_limiter_info.insert_stats.completed,
                              replay.rate_limiter_info.sample_stats.completed,
                              {name: int(getattr(worker, name)) for name in fields},
                              variables.rate_limiter_info.sample_stats.completed,
                              variables.rate_limiter_info.insert_stats.completed, replay.current_size,
                              replay.rate_limiter_info.min_size_to_sample)

    def _observation(self, now: float) -> Observation:
        windows = self._history.windows(now)
        where = machine(self._config.machine_name)
        server = None
        if len(self._snapshots) >= 2:
            server = server_window(self._snapshots[0][1], self._snapshots[-1][1], self._per_item, where.host,
                                   where.cores, where.load1)
        learners = [w for w in windows if w.role == "learner"]
        return Observation(self._window_s, learners[0] if learners else None,
                           sorted((w for w in windows if w.role == "actor"), key=lambda w: w.id),
                           [w for w in windows if w.role == "evaluator"], server,
                           float(self._config.samples_per_insert or 0.0))

    def _record(self, verdict, observation: Observation) -> None:
        """TensorBoard scalars (every round), the line as text and in the log (on a change, else once a minute)."""
        step = int(observation.learner.levels.get("train_step", 0)) if observation.learner else 0
        scalars = {f"verdict/{name}": value for name, value in verdict.figures.items()}
        scalars["verdict/part"] = float(PARTS.index(verdict.part))
        try:
            self._scalars.write(step, scalars)
        except (tf.errors.OpError, OSError):
            return
        changed = verdict.part != self._last_part
        if changed or self._repeat.ready():
            self._last_part = verdict.part
            log.info("bottleneck: %s", verdict.line())
            try:
                with self._writer.as_default(step=step):
                    tf.summary.text("verdict/line", "\n\n".join([verdict.line(), *verdict.evidence]))
                self._writer.flush()
            except (tf.errors.OpError, OSError):
                pass
