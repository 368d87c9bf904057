"""Replay server clients: bounded waits for the server and the check that its tables match this role's layout.

The replay data and the control tables (`variables`, `learner_requests`) may be served at two addresses
(`replay_address`, `control_address`); `wait_for_servers` waits for both and hands out a client for each.
What the tables hold is dqn/replay_layout/'s; weight publishing and pulling live in dqn/remote/.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import reverb

from dqn.errors import BadInput, ServiceError
from dqn.replay_layout.items import REPLAY_TABLE, REQUESTS_TABLE, RUN_SETTINGS_TABLE, VARIABLES_TABLE
from dqn.settings.config import CommonConfig

#: The tables at `replay_address` and at the control address.
DATA_TABLES = (REPLAY_TABLE,)
CONTROL_TABLES = (VARIABLES_TABLE, REQUESTS_TABLE, RUN_SETTINGS_TABLE)


class ReplayUnreachable(ServiceError):
    """The replay server did not answer within the allowed time."""


def server_info(client: reverb.Client, timeout_s: float) -> dict[str, Any]:
    """Table infos with a deadline (Reverb's own default is to wait forever)."""
    return client.server_info(timeout=max(1, int(round(timeout_s))))


def wait_for_server(address: str, wait_s: float, call_timeout_s: float = 5.0,
                    expected: tuple[str, ...] = DATA_TABLES + CONTROL_TABLES, name: str | None = None) -> reverb.Client:
    """A client once the server answers with the `expected` tables; ReplayUnreachable after `wait_s` of backoff.

    `name` is what messages call the server (default: replay if it holds replay data, else control).
    """
    client = reverb.Client(address)
    server = name or ("replay" if REPLAY_TABLE in expected else "control")
    deadline = time.monotonic() + wait_s
    delay = 0.25
    while True:
        try:
            info = server_info(client, min(call_timeout_s, max(1.0, deadline - time.monotonic())))
        except (reverb.errors.DeadlineExceededError, RuntimeError, ValueError) as error:
            if time.monotonic() + delay > deadline:
                raise ReplayUnreachable(f"cannot reach {server} server at {address} after {wait_s:.0f} s "
                                        f"({type(error).__name__}); is it running and is the address right?") from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if any(name not in info for name in expected):
            raise ReplayUnreachable(f"server at {address} has tables {sorted(info)}, not {'/'.join(expected)}: "
                                    "is it a dqn-service replay server of this version?")
        return client


@dataclasses.dataclass(frozen=True)
class ServerClients:
    """A client of the replay data's server and one of the control tables' server (the same one by default)."""

    replay: reverb.Client
    control: reverb.Client
    replay_address: str
    control_address: str

    @classmethod
    def at_one_address(cls, client: reverb.Client, address: str) -> ServerClients:
        """Both sides served by the server at `address` (the replay server serves all three tables)."""
        return cls(client, client, address, address)

    def for_table(self, table: str) -> tuple[reverb.Client, str]:
        """(client, address) of the server that holds `table`."""
        if table in CONTROL_TABLES:
            return self.control, self.control_address
        return self.replay, self.replay_address


def wait_for_servers(config: CommonConfig) -> ServerClients:
    """Clients of the replay data's and the control tables' servers, once each answers with its tables."""
    replay_address, control_address = config.replay_address, config.control_address_resolved()
    wait = dict(wait_s=config.connect_timeout_s, call_timeout_s=config.rpc_timeout_s)
    if control_address == replay_address:
        return ServerClients.at_one_address(wait_for_server(replay_address, **wait), replay_address)
    return ServerClients(wait_for_server(replay_address, expected=DATA_TABLES, **wait),
                         wait_for_server(control_address, expected=CONTROL_TABLES, **wait),
                         replay_address, control_address)


class SpecMismatch(BadInput):
    """The server's tables were created for other specs (another env or network) than this role's."""


def check_signatures(clients: ServerClients, signatures: dict[str, object], config: CommonConfig, role: str) -> None:
    """Refuses to work with tables whose signatures differ from ours: one bad writer poisons a table."""
    infos = {}
    for table, expected in signatures.items():
        client, address = clients.for_table(table)
        if address not in infos:
            infos[address] = server_info(client, config.rpc_timeout_s)
        served = infos[address][table].signature
        if served != expected:
            raise SpecMismatch(
                f"the {table!r} table at {address} was built for other specs than this {role} "
                f"(env {config.env_id!r}, layers {config.fc_layer_params}, layer norm {config.layer_norm}): server "
                f"{served} vs ours {expected}. Start every role with the same --env-id, network settings "
                f"(--fc-layer-params, --layer-norm, --conv-layer-params, --lstm-size) and replay item settings "
                f"(--n-step-update, --train-sequence-length, --initial-priority).")
