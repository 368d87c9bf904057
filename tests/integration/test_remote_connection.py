"""RemoteConnection on real Reverb servers (reconnects, throttled warnings), and the control tables at an address of
their own: weights and reset requests through one server, replay items through the other."""

import logging
import re
import time

import numpy as np
import pytest
import reverb

from dqn.remote.connection import RemoteConnection
from dqn.remote.replay_client import CONTROL_TABLES
from dqn.remote.reset_requests import ResetRequestSender
from dqn.remote.run_settings import fetch_run_settings, publish_run_settings
from dqn.remote.weights_puller import WeightsPuller, fetch_weights
from dqn.replay_layout.items import REPLAY_TABLE, REQUESTS_TABLE, RESET_REQUEST_STEP_KEY, SIGNATURE_KEY, VARIABLES_TABLE
from dqn.replay_layout.tables import latest_item_table, requests_signature
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig
from tests.conftest import FAST_FLAGS, free_port, run_cli, wait_until

pytestmark = pytest.mark.integration

LOGGER = "dqn.remote.connection"


def requests_server(port: int) -> reverb.Server:
    """A plain Reverb server with the one control table these tests write to."""
    return reverb.Server([latest_item_table(REQUESTS_TABLE, requests_signature())], port=port)


def insert_request(client: reverb.Client, step: int = 1) -> None:
    client.insert({RESET_REQUEST_STEP_KEY: np.int64(step), SIGNATURE_KEY: np.bytes_(b"")},
                  priorities={REQUESTS_TABLE: 1.0})


def ask(client: reverb.Client) -> dict:
    return client.server_info(timeout=1)


def test_a_connection_reconnects_to_a_server_restarted_on_the_same_port(caplog):
    port = free_port()
    server = requests_server(port)
    connection = RemoteConnection(f"localhost:{port}", timeout_s=3.0, purpose="test call")
    try:
        connection.call(insert_request)
        server.stop()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            with pytest.raises(Exception):  # noqa: B017 - whichever error the dead server gives
                connection.call(ask)
            assert connection.failing
            server = requests_server(port)
            connection.call(insert_request)  # the first call after the restart works
        assert not connection.failing and connection.failures == 1
        assert f"test call works again at localhost:{port} after 1 failed call(s)" in caplog.text
        assert ask(connection.client)[REQUESTS_TABLE].current_size == 1
    finally:
        server.stop()


def test_repeated_failures_log_one_warning_per_interval_with_a_count_and_one_line_on_recovery(caplog):
    port = free_port()
    server = requests_server(port)
    connection = RemoteConnection(f"localhost:{port}", timeout_s=5.0, purpose="test call", warn_interval_s=1.0)

    def missing_table(client: reverb.Client) -> None:  # a real call that the server refuses at once
        client.mutate_priorities("no_such_table", updates={1: 1.0})

    def fail(times: int) -> None:
        for _ in range(times):
            with pytest.raises(Exception):  # noqa: B017 - the server's own error
                connection.call(missing_table)

    try:
        with caplog.at_level(logging.INFO, logger=LOGGER):
            fail(5)
            time.sleep(1.1)
            fail(3)
            connection.call(insert_request)
            connection.call(insert_request)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 2, warnings
        assert ": 1 failed call(s) since the last report" in warnings[0]
        assert ": 5 failed call(s) since the last report" in warnings[1], "4 held back + the one that logs"
        recovered = [r.getMessage() for r in caplog.records if "works again" in r.getMessage()]
        assert recovered == [f"test call works again at localhost:{port} after 8 failed call(s)"]
    finally:
        server.stop()


def test_the_weights_puller_warns_once_per_interval_not_at_every_retry(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        puller = WeightsPuller(f"localhost:{free_port()}", timeout_s=0.5)  # nothing listens there
        try:
            wait_until(lambda: puller.connection.failures >= 3, 30, "three failed weight refreshes")
        finally:
            puller.close()
    warnings = [r.getMessage() for r in caplog.records if "weight refresh failed" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert puller.status == "replay unreachable"


def control_server(port: int, replay_address: str) -> reverb.Server:
    """The control tables alone, with the signatures the roles below build from FAST_FLAGS' network.

    The run's settings are copied from the replay server, which decided them: what a control server would hold.
    """
    config = CommonConfig(fc_layer_params=(32,), envs_per_item=4, replay_min_size=200)
    signatures = resolved_builder(config).table_signatures()
    server = reverb.Server([latest_item_table(name, signatures[name]) for name in CONTROL_TABLES], port=port)
    settings = fetch_run_settings(reverb.Client(replay_address), 10.0)
    publish_run_settings(reverb.Client(f"localhost:{port}"), settings, 10.0)
    return server


def test_roles_read_and_write_the_control_tables_at_the_control_address(system_factory):
    assert FAST_FLAGS == ("--replay-min-size", "200", "--fc-layer-params", "32", "--envs-per-item", "4")
    port = free_port()
    system = system_factory()
    control = control_server(port, system.server.address)
    control_address = f"localhost:{port}"
    try:
        system.shared_flags = ("--control-address", control_address)
        learner = system.start_learner()
        system.start_actor(0)
        system.wait_training(100)
        wait_until(lambda: system.progress("actor-0").get("weights_train_step", -1) > 0, 60,
                   "the actor to run on weights from the control server")

        def inserts(address: str, table: str) -> int:
            info = reverb.Client(address).server_info(timeout=10)[table]
            return info.rate_limiter_info.insert_stats.completed

        assert inserts(control_address, VARIABLES_TABLE) > 0
        assert fetch_weights(control_address, 10.0) is not None
        assert inserts(system.server.address, VARIABLES_TABLE) == 0, "no weights went to the replay server"
        assert inserts(system.server.address, REPLAY_TABLE) > 0, "replay items went to the replay server"
        status = run_cli("status", "--replay-address", system.server.address, "--control-address", control_address)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"replay server {system.server.address}: reachable" in status.stdout
        assert f"control server {control_address}: reachable" in status.stdout
        shown = re.search(r"^latest published train step: (\d+)$", status.stdout, re.M)
        assert shown and int(shown.group(1)) > 0, status.stdout

        # A reset request in the control server reaches the learner, which empties the replay server's table.
        before = inserts(system.server.address, REPLAY_TABLE)
        ResetRequestSender(control_address, 10.0).send(system.train_step())
        wait_until(lambda: "Q-network re-initialized" in learner.log(), 60, "the learner to apply the request")
        assert "replay emptied" in learner.log()
        assert inserts(system.server.address, REPLAY_TABLE) < before
        assert inserts(system.server.address, REQUESTS_TABLE) == 0
    finally:
        control.stop()
