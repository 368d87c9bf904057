"""The run's resolved settings on the replay server: published once by it, read by every other role at start.

One item in the `run_settings` table, the replay server's resolved settings as a JSON object (dqn/resolve.py), so
roles started apart (Compose, Swarm, Kubernetes, by hand) use the values the run decided once instead of each
deciding for itself, and `dqn-service status` can show them.

Settings whose replay ratio is still open (`samples_per_insert` null) are pending: a replay server started apart
serves them while it waits for the learner to time its SGD step on the learner's own machine and report it in the
`learner_speed` table; the learner reports, the other roles wait for the final settings.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import reverb

from dqn.remote.deadline import CallTimeout, DeadlineCaller
from dqn.remote.replay_client import CONTROL_TABLES, DATA_TABLES, ReplayUnreachable, server_info, wait_for_server
from dqn.replay_layout.items import LEARNER_SPEED_TABLE, RUN_SETTINGS_KEY, RUN_SETTINGS_TABLE

#: A learner's reported seconds per sample outside this range is not a measurement of an SGD step: it is ignored.
PLAUSIBLE_SECONDS_PER_SAMPLE = (1e-9, 1.0)
#: What a role may meet while the server it waits for is between its pending and its final tables.
_RESTARTING = (reverb.errors.DeadlineExceededError, RuntimeError, ValueError, CallTimeout)


def is_pending(settings: dict[str, Any]) -> bool:
    """The replay ratio is still open: the replay server waits for the learner's speed."""
    return settings.get("samples_per_insert") is None


def publish_run_settings(client: reverb.Client, settings: dict[str, Any], timeout_s: float) -> None:
    """Replaces the `run_settings` item with `settings` (a resolved config's fields, `to_dict`)."""
    _put_json(client, RUN_SETTINGS_TABLE, settings, timeout_s)


def fetch_run_settings(client: reverb.Client, timeout_s: float) -> dict[str, Any] | None:
    """The published settings, or None while the table is empty."""
    return _get_json(client, RUN_SETTINGS_TABLE, timeout_s)


def report_learner_speed(client: reverb.Client, seconds_per_sample: float, host: str, timeout_s: float) -> None:
    """The learner's answer to pending settings: its SGD step's seconds per sample on its machine `host`."""
    _put_json(client, LEARNER_SPEED_TABLE, {"seconds_per_sample": seconds_per_sample, "host": host}, timeout_s)


def wait_for_learner_speed(client: reverb.Client, wait_s: float, timeout_s: float) -> tuple[float, str] | None:
    """(seconds per sample, host) once a plausible report arrives, or None after `wait_s`; others are ignored."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        report = _get_json(client, LEARNER_SPEED_TABLE, timeout_s)
        if report is not None:
            seconds, host = report.get("seconds_per_sample"), str(report.get("host", "?"))[:100]
            low, high = PLAUSIBLE_SECONDS_PER_SAMPLE
            if isinstance(seconds, (int, float)) and low <= seconds <= high:
                return float(seconds), host
        time.sleep(0.2)
    return None


def wait_for_run_settings(address: str, wait_s: float, timeout_s: float, replay_too: bool,
                          on_pending: Callable[[reverb.Client, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The run's final settings from the server at `address`, waiting up to `wait_s` for the server and for them.

    `replay_too`: the server also holds the replay data (the replay server, as by default), so it is named so.
    Pending settings call `on_pending(client, settings)` once (the learner reports its speed there) and restart
    the wait: the server waits for the learner under a deadline of its own, so this wait stays bounded.
    """
    deadline = time.monotonic() + wait_s
    answered = False
    while True:
        client = wait_for_server(address, wait_s=max(1.0, deadline - time.monotonic()), call_timeout_s=timeout_s,
                                 expected=(RUN_SETTINGS_TABLE,), name="replay" if replay_too else "control")
        try:
            settings = fetch_run_settings(client, timeout_s)
        except _RESTARTING:  # it stopped its pending tables and starts its final ones
            settings = None
        if settings is not None and not is_pending(settings):
            wait_for_server(address, wait_s=max(1.0, deadline - time.monotonic()), call_timeout_s=timeout_s,
                            expected=DATA_TABLES + CONTROL_TABLES if replay_too else CONTROL_TABLES)
            return settings
        if settings is not None:
            if on_pending is not None and not answered:
                on_pending(client, settings)
                answered = True
            deadline = time.monotonic() + wait_s
        if time.monotonic() > deadline:
            raise ReplayUnreachable(f"the replay server at {address} has not published the run's settings after "
                                    f"{wait_s:.0f} s; is it still starting (see its log)?")
        time.sleep(0.2)


def _put_json(client: reverb.Client, table: str, value: dict[str, Any], timeout_s: float) -> None:
    text = json.dumps(value, sort_keys=True).encode()
    DeadlineCaller().call(lambda: client.insert({RUN_SETTINGS_KEY: np.array(text, dtype=object)},
                                                priorities={table: 1.0}), timeout_s)


def _get_json(client: reverb.Client, table: str, timeout_s: float) -> dict[str, Any] | None:
    """The JSON object of a one-item table, or None while it is empty or the item is not a JSON object."""
    if server_info(client, timeout_s)[table].current_size == 0:
        return None
    sample = DeadlineCaller().call(
        lambda: next(client.sample(table, 1, emit_timesteps=False, unpack_as_table_signature=True)), timeout_s)
    text = np.asarray(sample.data[RUN_SETTINGS_KEY]).reshape(-1)[0]
    try:
        value = json.loads(text.decode() if isinstance(text, bytes) else str(text))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None
