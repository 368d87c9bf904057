"""The replay item format in numbers and names: no TensorFlow here.

One replay item is `sequence_length` consecutive steps (n + 1 for n-step returns, train_sequence_length for an
RNN) of either one env (`envs_per_item` 1) or the same steps of a block of envs ([L, E, ...]). Reverb counts
items, so table sizes and limiter thresholds given in transitions become item counts here.
"""

from __future__ import annotations

import dataclasses

#: The Reverb tables every role agrees on: replay items, the latest weights, and the evaluator's requests.
REPLAY_TABLE = "replay"
VARIABLES_TABLE = "variables"
REQUESTS_TABLE = "learner_requests"
#: The run's resolved settings (dqn/resolve.py), published by the replay server and adopted by every other role.
RUN_SETTINGS_TABLE = "run_settings"
#: Key of the single item in `run_settings`: the resolved settings as one JSON object.
RUN_SETTINGS_KEY = "settings_json"
#: Served only while a replay server started apart waits for the learner to time its SGD step (same item format).
LEARNER_SPEED_TABLE = "learner_speed"
#: Each role's reports for the bottleneck verdict (dqn/bottleneck/), read once each by the replay server, and the
#: verdict it draws from them (one item). Both hold JSON text under REPORT_KEY.
ROLE_REPORTS_TABLE = "role_reports"
VERDICT_TABLE = "verdict"
REPORT_TABLES = (ROLE_REPORTS_TABLE, VERDICT_TABLE)
REPORT_KEY = "report_json"
#: Keys of the single item in the `variables` table.
POLICY_VARIABLES_KEY = "policy_variables"
TRAIN_STEP_KEY = "train_step"
#: The train step the actors' epsilon schedule counts from (0, or the learner's last reset).
EXPLORATION_START_KEY = "exploration_start"
#: Key of the single item in `learner_requests`: the train step of the evaluation that asked for a reset.
RESET_REQUEST_STEP_KEY = "reset_request_step"
#: Key of the HMAC of a `variables` or `learner_requests` item (dqn/remote/item_signing.py); empty when unsigned.
SIGNATURE_KEY = "signature"
#: Key in a replay item's `policy_info` of the actor's initial priority (see `actors_send_priorities`).
INITIAL_PRIORITY_KEY = "initial_priority"


@dataclasses.dataclass(frozen=True)
class ItemShape:
    """Steps and envs per replay item and what the item carries, derived from the settings alone."""

    sequence_length: int
    envs_per_item: int
    run_past_episode_end: bool
    actors_send_priorities: bool

    @classmethod
    def from_config(cls, config) -> ItemShape:
        """The shape for a `CommonConfig` (any role's config)."""
        return cls(sequence_length=config.train_sequence_length if config.lstm_size else config.n_step_update + 1,
                   envs_per_item=config.resolved_envs_per_item(),
                   # n-step items start at every step of an episode and may reach into the next (see unpack.py).
                   run_past_episode_end=config.n_step_update > 1,
                   actors_send_priorities=actors_send_priorities(config))

    @property
    def transitions_per_item(self) -> int:
        """Transitions one item trains on (learner rows per item); replay figures are reported in these."""
        return self.envs_per_item

    def items(self, transitions: int) -> int:
        """A count of transitions as whole items (rounded up), for table sizes and limiter thresholds."""
        return -(-transitions // self.envs_per_item)


def actors_send_priorities(config) -> bool:
    """Replay items carry the actor's initial priority in `policy_info` (see actor/initial_priorities.py)."""
    if not config.prioritized_replay or config.initial_priority == "max":
        return False
    return config.initial_priority == "td_error" or config.actors_compute_td_errors()
