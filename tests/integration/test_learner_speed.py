"""A replay server started apart takes a slow env's replay ratio from the learner's timing on the learner's machine."""

import json
import re

import numpy as np
import reverb

from dqn.remote.replay_client import server_info
from dqn.remote.run_settings import report_learner_speed, wait_for_learner_speed
from dqn.replay_layout.items import REPLAY_TABLE
from dqn.replay_layout.tables import pending_settings_tables
from tests.conftest import FAST_FLAGS, free_port, health_status, wait_until

SLOW_ENV = "tests.user_envs:SlowCartPole-v0"
NUMBER = r"([0-9.]+(?:e[+-]?\d+)?)"


def _start_server(spawn, root, *flags):
    port, health = free_port(), free_port()
    server = spawn("replay-server", "--root-dir", str(root), "--port", str(port), "--health-port", str(health),
                   "--env-id", SLOW_ENV, *FAST_FLAGS, *flags, name="replay-server")
    return server, port, health


def test_the_replay_ratio_follows_the_speed_the_learner_reports_from_its_machine(spawn, tmp_path):
    root = tmp_path / "run"
    server, port, health = _start_server(spawn, root)
    wait_until(lambda: "waiting up to" in server.log() or not server.alive(), 120, "the server waits for the learner")
    assert server.alive(), server.log()
    assert health_status(health) != "SERVING"  # nothing is served as the run's until its ratio is decided

    learner = spawn("learner", "--root-dir", str(root), "--replay-address", f"localhost:{port}", "--env-id", SLOW_ENV,
                    *FAST_FLAGS, "--batch-size", "64", "--max-train-steps", "1000000", name="learner")
    wait_until(lambda: not server.alive() or health_status(health) == "SERVING", 180, "replay server SERVING")
    assert server.alive(), server.log()

    timed = re.search(r"its SGD step takes " + NUMBER + " us a sample", learner.log())
    decided = re.search(r"samples_per_insert auto: " + NUMBER + r" \(.*the learner's SGD step takes " + NUMBER +
                        r" us a sample on the learner's machine", server.log())
    assert timed and decided, (learner.log(), server.log())
    assert timed[1] == decided[2]
    ratio = float(decided[1])
    info = server_info(reverb.Client(f"localhost:{port}"), 10)
    assert info[REPLAY_TABLE].rate_limiter_info.samples_per_insert == ratio
    learner_config = root / "learner" / "config.json"
    wait_until(learner_config.exists, 120, "the learner's config.json")
    assert json.loads(learner_config.read_text())["samples_per_insert"] == ratio


def test_with_no_learner_in_time_the_server_times_the_learner_itself_and_says_so(spawn, tmp_path):
    server, _, health = _start_server(spawn, tmp_path / "run", "--learner-speed-wait-s", "1")
    wait_until(lambda: not server.alive() or health_status(health) == "SERVING", 180, "replay server SERVING")
    assert server.alive(), server.log()
    assert "no learner reported its speed within 1 s" in server.log()
    assert re.search(r"samples_per_insert auto: " + NUMBER + r" \(.* us a sample on this machine", server.log())


def test_implausible_speed_reports_are_ignored():
    server = reverb.Server(tables=pending_settings_tables(), port=None)
    try:
        client = reverb.Client(f"localhost:{server.port}")
        for forged in (-1.0, 0.0, 1e9, float("nan")):
            report_learner_speed(client, forged, "forger", 5)
            assert wait_for_learner_speed(client, 0.5, 5) is None
        client.insert({"settings_json": np.array(b"not json", dtype=object)}, priorities={"learner_speed": 1.0})
        assert wait_for_learner_speed(client, 0.5, 5) is None
        report_learner_speed(client, 2e-5, "learner-host", 5)
        assert wait_for_learner_speed(client, 0.5, 5) == (2e-5, "learner-host")
    finally:
        server.stop()
