"""The run's resolved settings on the replay server: published once by it, read by every other role at start.

One item in the `run_settings` table, the replay server's resolved settings as a JSON object (dqn/resolve.py), so
roles started apart (Compose, Swarm, Kubernetes, by hand) use the values the run decided once instead of each
deciding for itself, and `dqn-service status` can show them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import reverb

from dqn.remote.deadline import DeadlineCaller
from dqn.remote.replay_client import CONTROL_TABLES, DATA_TABLES, ReplayUnreachable, server_info, wait_for_server
from dqn.replay_layout.items import RUN_SETTINGS_KEY, RUN_SETTINGS_TABLE


def publish_run_settings(client: reverb.Client, settings: dict[str, Any], timeout_s: float) -> None:
    """Replaces the `run_settings` item with `settings` (a resolved config's fields, `to_dict`)."""
    text = json.dumps(settings, sort_keys=True).encode()
    DeadlineCaller().call(lambda: client.insert({RUN_SETTINGS_KEY: np.array(text, dtype=object)},
                                                priorities={RUN_SETTINGS_TABLE: 1.0}), timeout_s)


def fetch_run_settings(client: reverb.Client, timeout_s: float) -> dict[str, Any] | None:
    """The published settings, or None while the table is empty."""
    if server_info(client, timeout_s)[RUN_SETTINGS_TABLE].current_size == 0:
        return None
    sample = DeadlineCaller().call(
        lambda: next(client.sample(RUN_SETTINGS_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True)),
        timeout_s)
    text = np.asarray(sample.data[RUN_SETTINGS_KEY]).reshape(-1)[0]
    return json.loads(text.decode() if isinstance(text, bytes) else str(text))


def wait_for_run_settings(address: str, wait_s: float, timeout_s: float, replay_too: bool) -> dict[str, Any]:
    """The run's settings from the server at `address`, waiting up to `wait_s` for the server and for them.

    `replay_too`: the server also holds the replay data (the replay server, as by default), so it is named so.
    """
    deadline = time.monotonic() + wait_s
    client = wait_for_server(address, wait_s=wait_s, call_timeout_s=timeout_s,
                             expected=DATA_TABLES + CONTROL_TABLES if replay_too else CONTROL_TABLES)
    while (settings := fetch_run_settings(client, timeout_s)) is None:
        if time.monotonic() > deadline:
            raise ReplayUnreachable(f"the replay server at {address} has not published the run's settings after "
                                    f"{wait_s:.0f} s; is it still starting (see its log)?")
        time.sleep(0.1)
    return settings
