"""Replay server clients: bounded waits for the server and the check that its tables match this role's layout.

What the tables hold is dqn/replay_layout/'s; weight publishing and pulling live in dqn/remote/.
"""

from __future__ import annotations

import time
from typing import Any

import reverb

from dqn.errors import BadInput, ServiceError
from dqn.replay_layout.items import REPLAY_TABLE, REQUESTS_TABLE, RUN_SETTINGS_TABLE, VARIABLES_TABLE
from dqn.settings.config import CommonConfig


class ReplayUnreachable(ServiceError):
    """The replay server did not answer within the allowed time."""


def server_info(client: reverb.Client, timeout_s: float) -> dict[str, Any]:
    """Table infos with a deadline (Reverb's own default is to wait forever)."""
    return client.server_info(timeout=max(1, int(round(timeout_s))))


def wait_for_server(address: str, wait_s: float, call_timeout_s: float = 5.0) -> reverb.Client:
    """A client once the server answers; ReplayUnreachable after `wait_s` of backoff."""
    client = reverb.Client(address)
    deadline = time.monotonic() + wait_s
    delay = 0.25
    while True:
        try:
            info = server_info(client, min(call_timeout_s, max(1.0, deadline - time.monotonic())))
        except (reverb.errors.DeadlineExceededError, RuntimeError, ValueError) as error:
            if time.monotonic() + delay > deadline:
                raise ReplayUnreachable(f"cannot reach replay server at {address} after {wait_s:.0f} s "
                                        f"({type(error).__name__}); is it running and is the address right?") from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        expected = (REPLAY_TABLE, VARIABLES_TABLE, REQUESTS_TABLE, RUN_SETTINGS_TABLE)
        if any(name not in info for name in expected):
            raise ReplayUnreachable(f"server at {address} has tables {sorted(info)}, not {'/'.join(expected)}: "
                                    "is it a dqn-service replay server of this version?")
        return client


class SpecMismatch(BadInput):
    """The server's tables were created for other specs (another env or network) than this role's."""


def check_signatures(client: reverb.Client, signatures: dict[str, object], config: CommonConfig, role: str) -> None:
    """Refuses to work with tables whose signatures differ from ours: one bad writer poisons a table."""
    info = server_info(client, config.rpc_timeout_s)
    for table, expected in signatures.items():
        if info[table].signature != expected:
            raise SpecMismatch(
                f"the {table!r} table at {config.replay_address} was built for other specs than this {role} "
                f"(env {config.env_id!r}, layers {config.fc_layer_params}): server {info[table].signature} vs "
                f"ours {expected}. Start every role with the same --env-id, network settings and replay item "
                f"settings (--n-step-update, --lstm-size, --train-sequence-length, --initial-priority); an env whose "
                f"random play is not reproducible from --seed needs --image-encoding set explicitly.")
