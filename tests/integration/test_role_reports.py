"""Role reports on a real replay server: they arrive, and what is not a report is refused without harm."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import reverb

from dqn.bottleneck.reports import parse_report
from dqn.remote.deadline import DeadlineCaller
from dqn.remote.role_reports import RoleReporter, drain_reports, fetch_verdict
from dqn.replay_layout.items import REPORT_KEY, ROLE_REPORTS_TABLE
from tests.conftest import health_status, wait_until
from tests.helpers import FAST

pytestmark = pytest.mark.integration


def test_a_reporter_delivers_its_counters_with_its_process_usage(replay_server_factory):
    server = replay_server_factory(*FAST, "--report-interval-s", "0")  # no verdict round: the test reads the table
    counters = {"sgd_steps": 0.0}
    reporter = RoleReporter(server.address, 5.0, "learner", "0", lambda: {
        **counters, "train_s": 1.5, "data_wait_s": 0.25, "train_step": 7.0, "batch": 64.0, "publish_interval": 50.0,
        "samples_per_insert": 4.0, "finished": 0.0}, interval_s=0.2)
    try:
        client, caller, reports = reverb.Client(server.address), DeadlineCaller(), []

        def two_reports() -> bool:
            counters["sgd_steps"] += 10.0
            reports.extend(parse_report(text) for text in drain_reports(client, 5.0, caller))
            return len(reports) >= 2

        wait_until(two_reports, 30, "two reports in the role_reports table")
    finally:
        reporter.close()
    first, last = reports[0], reports[-1]
    assert (first.role, first.id, first.instance) == ("learner", "0", last.instance)
    assert last.counters["sgd_steps"] > first.counters["sgd_steps"] and last.clock_s > first.clock_s
    assert last.cpu_s > 0 and last.cores >= 1 and last.waited_s is not None


def test_reports_that_are_not_ours_are_refused_and_the_server_serves_on(replay_server_factory):
    server = replay_server_factory(*FAST)
    client = reverb.Client(server.address)
    good = RoleReporter(server.address, 5.0, "evaluator", "0", lambda: {"busy_s": 0.0, "evaluations": 0.0}, 0)
    bad = [b"x" * 100_000, b"\xff\xfe not utf-8", b"[]", b'{"role": "actor"}',
           good.report().to_json().replace('"busy_s":0.0', '"busy_s":NaN').encode(),
           json.dumps({**json.loads(good.report().to_json()), "counters": {"busy_s": math.inf}}).encode()]
    for text in bad:
        client.insert({REPORT_KEY: np.array(text, dtype=object)}, priorities={ROLE_REPORTS_TABLE: 1.0})
    wait_until(lambda: "refused" in server.process.log(), 30, "the replay server to refuse the reports")
    wait_until(lambda: client.server_info(timeout=5)[ROLE_REPORTS_TABLE].current_size == 0, 30,
               "every report to be read")
    assert server.process.alive() and health_status(server.health_port) == "SERVING"
    verdict = fetch_verdict(client, 5.0)
    assert verdict is not None and verdict["part"] == "warming up", verdict
