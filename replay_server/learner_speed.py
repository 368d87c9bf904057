"""The learner's speed for a slow env's replay ratio, asked of the run's learner on its own machine.

A replay server started apart cannot time the learner where it runs (another node, perhaps a GPU): it serves the
settings decided so far, pending, with a table for the answer, waits for the learner to time its SGD step and
report it, then stops these tables so the caller can start the run's own on the same port. With no plausible
answer in time it times the learner on this machine, and says so.
"""

from __future__ import annotations

import logging
import tempfile

import reverb

from dqn.envs.making import EnvSpecs
from dqn.remote.run_settings import publish_run_settings, wait_for_learner_speed
from dqn.replay_layout.tables import pending_settings_tables
from dqn.resolve import LearnerSpeed, time_learner_here
from dqn.settings import loading as config_loading
from dqn.settings.config import ReplayServerConfig

log = logging.getLogger("replay-server")


def ask_the_learner(server_config: ReplayServerConfig) -> LearnerSpeed:
    """A `learner_speed` for `resolve_run` that waits up to learner_speed_wait_s for the learner's own timing."""

    def learner_speed(config, specs: EnvSpecs) -> tuple[float, str]:
        wait_s = server_config.learner_speed_wait_s
        if wait_s <= 0:
            return time_learner_here(config, specs)
        with tempfile.TemporaryDirectory(prefix="dqn-pending-") as nothing_to_keep:
            return _wait_for_the_learner(server_config, config, specs, nothing_to_keep)

    return learner_speed


def _wait_for_the_learner(server_config: ReplayServerConfig, config, specs: EnvSpecs, scratch: str):
    """Serves the pending settings until the learner reports (or learner_speed_wait_s), then stops serving them."""
    wait_s = server_config.learner_speed_wait_s
    # Reverb's default checkpointer would leave an empty directory in /tmp for each start.
    server = reverb.Server(tables=pending_settings_tables(), port=server_config.port,
                           checkpointer=reverb.checkpointers.DefaultCheckpointer(path=scratch))
    try:
        client = reverb.Client(f"localhost:{server.port}")
        publish_run_settings(client, config_loading.to_dict(config), server_config.rpc_timeout_s)
        log.info("samples_per_insert auto: the env is slow, so the replay ratio depends on the learner's speed; "
                 "waiting up to %.0f s for the learner to time its SGD step on its machine", wait_s)
        report = wait_for_learner_speed(client, wait_s, server_config.rpc_timeout_s)
    finally:
        server.stop()
    if report is None:
        log.warning("samples_per_insert auto: no learner reported its speed within %.0f s "
                    "(--learner-speed-wait-s / DQN_LEARNER_SPEED_WAIT_S); timing the learner on this machine "
                    "instead, which may differ from the learner's", wait_s)
        return time_learner_here(config, specs)
    seconds, host = report
    return seconds, f"on the learner's machine ({host}), as it reported"
