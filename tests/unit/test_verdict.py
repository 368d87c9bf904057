"""The bottleneck verdict's pure parts: reports from the network checked, windows of rates, and `judge`.

`judge` is tested on observations recorded from the scenario runs (tests/integration/test_verdict_scenarios.py,
with VERDICT_RECORD_DIR set; kept in tests/unit/verdict_observations/) and on observations built here for the
cases a 2-core test machine cannot stage (a machine this run fills, outside load).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from dqn.bottleneck.reports import (
    MAX_REPORT_BYTES,
    BadReport,
    ReportHistory,
    RoleReport,
    RoleWindow,
    ServerSnapshot,
    parse_report,
    role_window,
    server_window,
)
from dqn.bottleneck.verdict import PARTS, Observation, judge

RECORDED = Path(__file__).parent / "verdict_observations"


def actor_report(clock: float, env_steps: float = 0.0, instance: str = "a1", **counters: float) -> RoleReport:
    values = {"env_steps": env_steps, "env_s": 0.0, "policy_s": 0.0, "write_s": 0.0, "held_s": 0.0,
              "weights_s": 0.0, "no_weights_s": 0.0, "downloads": 0.0, "download_s": 0.0, "download_bytes": 0.0,
              "num_envs": 4.0, "weights_step": 10.0, "warming_up": 0.0, **counters}
    return RoleReport("actor", "0", instance, "host-a", 2.0, 1.0, 1000.0 + clock, clock, clock / 2, clock / 4, 0.0,
                      values)


def test_a_report_survives_the_wire():
    report = actor_report(12.0, env_steps=480.0, env_s=3.0)
    assert parse_report(report.to_json()) == report
    assert parse_report(report.to_json().encode()) == report


@pytest.mark.parametrize("change, why", [
    (lambda r: "x" * (MAX_REPORT_BYTES + 1), "bytes"),
    (lambda r: "{not json", "not JSON"),
    (lambda r: "[1, 2]", "not a JSON object"),
    (lambda r: r.replace('"role":"actor"', '"role":"miner"'), "unknown role"),
    (lambda r: r.replace('"env_s":', '"env_seconds":'), "env_s is not a number"),
    (lambda r: r.replace('"env_s":0.0', '"env_s":NaN'), "not finite"),
    (lambda r: r.replace('"env_s":0.0', '"env_s":Infinity'), "not finite"),
    (lambda r: r.replace('"env_s":0.0', '"env_s":1e300'), "out of range"),
    (lambda r: r.replace('"env_s":0.0', '"env_s":-1'), "negative"),
    (lambda r: r.replace('"env_s":0.0', '"env_s":true'), "not a number"),
    (lambda r: r.replace('"env_s":0.0', '"env_s":"3"'), "not a number"),
    (lambda r: r.replace('"id":"0"', '"id":"' + "7" * 40 + '"'), "id is not a short text"),
    (lambda r: r.replace('"host":"host-a"', '"host":""'), "host is not a short text"),
    (lambda r: r.replace('"cores":2.0', '"cores":0'), "out of range"),
    (lambda r: "[" * 5000 + "]" * 5000, "bytes"),
])
def test_reports_that_are_not_ours_are_refused_naming_why(change, why):
    with pytest.raises(BadReport, match=why):
        parse_report(change(actor_report(5.0).to_json()))


def test_a_window_divides_counter_differences_by_the_senders_own_clock():
    first = actor_report(100.0, env_steps=0.0, env_s=0.0, held_s=0.0)
    last = actor_report(110.0, env_steps=4000.0, env_s=6.0, held_s=2.0)
    window = role_window(first, last)
    assert window.seconds == 10.0 and window.rate("env_steps") == 400.0
    assert window.share("env_s") == pytest.approx(0.6) and window.share("held_s") == pytest.approx(0.2)
    assert window.cpu == pytest.approx(0.5)  # cpu_s = clock / 2
    assert window.starved == pytest.approx(2.5 / (5.0 + 2.5))  # waited_s = clock / 4
    assert window.throttled == 0.0
    assert window.levels["weights_step"] == 10.0
    assert role_window(first, actor_report(100.2)) is None  # too short to say anything


def test_history_waits_for_a_role_to_settle_then_windows_the_last_seconds():
    history = ReportHistory(window_s=10.0, stale_s=30.0, settle_s=15.0)
    for second in range(0, 30, 2):
        history.add(actor_report(float(second), env_steps=100.0 * second), now=float(second))
        if second < 15:
            assert history.windows(float(second)) == []
    (window,) = history.windows(28.0)
    assert 10.0 <= window.seconds <= 12.0 and window.rate("env_steps") == pytest.approx(100.0)
    assert history.windows(28.0 + 31.0) == []  # silent for longer than stale_s: forgotten


@pytest.mark.parametrize("restart", [dict(instance="a2"), dict(env_steps=0.0)])
def test_a_restarted_role_starts_a_new_history(restart):
    history = ReportHistory(window_s=10.0, stale_s=30.0, settle_s=15.0)
    for second in range(0, 20, 2):
        history.add(actor_report(float(second), env_steps=100.0 * second + 100.0), now=float(second))
    assert history.windows(18.0)
    history.add(actor_report(20.0, **restart), now=20.0)
    assert history.windows(20.0) == []  # settling again: its counters started over


def test_the_server_window_reads_reverbs_table_worker_time():
    def snapshot(clock: float, scale: int) -> ServerSnapshot:
        return ServerSnapshot(clock, clock / 10, 0.0, clock * 0.9, 100 * scale, 400 * scale,
                              {"running_ms": 10 * scale, "sampling_ms": 20 * scale, "inserting_ms": 30 * scale,
                               "sleeping_ms": 140 * scale, "waiting_for_sampling_ms": 600 * scale,
                               "waiting_for_inserts_ms": 0}, 5 * scale, scale)

    window = server_window(snapshot(50.0, 0), snapshot(60.0, 10), 4, "host-s", 2.0, 0.5)
    assert window.inserts_per_s == 400.0 and window.samples_per_s == 1600.0
    assert window.worker == pytest.approx({"busy": 0.06, "idle": 0.14, "inserts_held": 0.6, "samples_held": 0.0})
    assert window.cpu == pytest.approx(0.1) and window.throttled == pytest.approx(0.9)
    assert window.pulls_per_s == 5.0 and window.publications_per_s == 1.0


def recorded() -> list[Path]:
    return sorted(RECORDED.glob("*.json"))


def test_every_scenario_has_a_recorded_observation():
    names = {path.stem for path in recorded()}
    assert {"balanced", "learner", "replay_server", "replay_link", "actors_envs", "weight_transfer",
            "evaluator"} <= names, names


@pytest.mark.parametrize("path", recorded(), ids=lambda path: path.stem)
def test_judge_names_the_part_each_recorded_scenario_was_named(path: Path):
    record = json.loads(path.read_text())
    verdict = judge(Observation.from_dict(record["observation"]))
    assert verdict.part == record["part"], f"{verdict.line()}\n" + "\n".join(verdict.evidence)
    assert verdict.change and verdict.evidence
    assert all(math.isfinite(value) for value in verdict.figures.values())


def window(role: str, cpu: float, starved: float, host: str = "m", **rates: float) -> RoleWindow:
    levels = {"actor": {"num_envs": 4.0, "weights_step": 100.0, "warming_up": 0.0},
              "learner": {"train_step": 100.0, "batch": 64.0, "publish_interval": 50.0, "samples_per_insert": 4.0},
              "evaluator": {}}[role]
    return RoleWindow(role, "0", host, 2.0, 3.0, 10.0, 1000.0, cpu, starved, 0.0, rates, levels)


def busy_run(actor_cpu: float, evaluator_cpu: float, starved: float) -> Observation:
    """A balanced run whose roles all wait for cores: the actor at the CPU given, the learner at one core."""
    actor = window("actor", actor_cpu, starved, env_steps=2000.0, env_s=0.5, policy_s=0.2, write_s=0.2, held_s=0.1)
    learner = window("learner", 1.0, starved, sgd_steps=120.0, train_s=0.8, data_wait_s=0.1)
    evaluator = window("evaluator", evaluator_cpu, starved, busy_s=0.9, evaluations=1.0)
    return Observation(10.0, learner, [actor], [evaluator], None, 4.0)


def test_outside_load_alone_names_no_part_but_a_run_that_fills_its_machine_names_the_cores():
    assert judge(busy_run(actor_cpu=0.3, evaluator_cpu=0.05, starved=0.8)).part == "balanced"
    verdict = judge(busy_run(actor_cpu=0.85, evaluator_cpu=0.05, starved=0.6))
    assert verdict.part == "machine's cores" and "1.9 of the 2 cores" in verdict.why
    assert judge(busy_run(actor_cpu=0.3, evaluator_cpu=0.8, starved=0.6)).part == "evaluator"
    assert judge(busy_run(actor_cpu=0.9, evaluator_cpu=0.05, starved=0.2)).part == "balanced"


def test_warming_up_until_the_learner_and_actors_report_the_replay_fills_and_the_warm_up_ends():
    run = busy_run(0.3, 0.05, 0.1)
    empty = ServerSnapshot(0.0, 0.0, 0.0, 0.0, 0, 0, {}, 0, 0, size=0, min_size=50)
    filling = server_window(empty, dataclasses.replace(empty, clock_s=10.0, inserts=30, size=30), 16, "m", 2.0, 1.0)
    verdict = judge(dataclasses.replace(run, server=filling))
    assert verdict.part == "warming up" and "30 of 50 items" in verdict.why
    assert judge(dataclasses.replace(run, learner=None)).part == "warming up"
    assert judge(dataclasses.replace(run, actors=[])).part == "warming up"
    warming = dataclasses.replace(run.actors[0], levels={**run.actors[0].levels, "warming_up": 1.0})
    assert judge(dataclasses.replace(run, actors=[warming])).part == "warming up"


def test_every_part_is_one_the_verdict_knows():
    for path in recorded():
        assert json.loads(path.read_text())["part"] in PARTS


def test_a_finished_learner_is_named_as_what_holds_the_actors():
    run = busy_run(0.3, 0.05, 0.1)
    finished = dataclasses.replace(run.learner, levels={**run.learner.levels, "finished": 1.0})
    verdict = judge(dataclasses.replace(run, learner=finished))
    assert verdict.part == "learner" and "max_train_steps" in verdict.why


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_the_cpu_quota_and_its_throttled_time_come_from_the_process_cgroup(tmp_path, layout):
    from dqn.process.cgroup import cpu_quota, cpu_throttled_s

    root = tmp_path / "cgroup"
    if layout == "v2":
        (root / "pod" / "role").mkdir(parents=True)
        (root / "cgroup.controllers").write_text("cpu memory\n")
        (root / "pod" / "cpu.max").write_text("150000 100000\n")
        (root / "pod" / "role" / "cpu.max").write_text("max 100000\n")
        (root / "pod" / "role" / "cpu.stat").write_text("usage_usec 9\nthrottled_usec 2500000\n")
        proc = "0::/pod/role\n"
    else:
        (root / "cpu" / "pod" / "role").mkdir(parents=True)
        (root / "cpu" / "pod" / "role" / "cpu.cfs_quota_us").write_text("50000\n")
        (root / "cpu" / "pod" / "role" / "cpu.cfs_period_us").write_text("100000\n")
        (root / "cpu" / "pod" / "role" / "cpu.stat").write_text("nr_throttled 3\nthrottled_time 1500000000\n")
        (root / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
        proc = "4:memory:/pod/role\n1:cpu:/pod/role\n"
    (tmp_path / "proc").write_text(proc)
    quota, throttled = cpu_quota(str(tmp_path / "proc"), str(root)), cpu_throttled_s(str(tmp_path / "proc"), str(root))
    assert (quota, throttled) == ((1.5, 2.5) if layout == "v2" else (0.5, 1.5))
    (tmp_path / "proc").write_text("1:cpu:/elsewhere\n")
    assert cpu_quota(str(tmp_path / "proc"), str(root)) is None  # no quota where the process is
