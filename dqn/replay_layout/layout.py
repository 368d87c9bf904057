"""`ReplayLayout`: the one object the roles ask about replay items (the way Acme's DQN builder owns its data).

The replay server builds its tables from it, actors get their writer from it, the learner unpacks sampled
batches and sends one priority per item through it. Changing what an item holds means changing this package.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dqn.replay_layout import tables, unpack
from dqn.replay_layout.env_block_writer import BlockStreams
from dqn.replay_layout.env_stream_writer import TrajectoryStreams
from dqn.replay_layout.items import REPLAY_TABLE, REQUESTS_TABLE, RUN_SETTINGS_TABLE, VARIABLES_TABLE, ItemShape


@dataclasses.dataclass(frozen=True)
class ReplayLayout:
    """The replay item format of one config: shape, signatures, tables, packing and unpacking."""

    shape: ItemShape
    config: object  # the CommonConfig it was made from (table sizes, rate limiter, sampler, gamma)

    @classmethod
    def from_config(cls, config) -> ReplayLayout:
        """The layout every role derives from the same settings (no role reads another's files)."""
        return cls(ItemShape.from_config(config), config)

    @property
    def sequence_length(self) -> int:
        """Steps per item and per sampled row: n + 1, or train_sequence_length for an RNN."""
        return self.shape.sequence_length

    @property
    def envs_per_item(self) -> int:
        """Envs per item: 1 = one stream per env, > 1 = blocks of envs ([L, E, ...])."""
        return self.shape.envs_per_item

    @property
    def transitions_per_item(self) -> int:
        """Transitions (learner rows) one item holds."""
        return self.shape.transitions_per_item

    @property
    def actors_send_priorities(self) -> bool:
        """Items carry the actor's initial priority (Ape-X, see actor/initial_priorities.py)."""
        return self.shape.actors_send_priorities

    def item_step_spec(self, collect_data_spec) -> object:
        """One step of one item, from the agent's collect_data_spec."""
        return tables.item_step_spec(self.shape, collect_data_spec)

    def signatures(self, item_step_spec, policy_variables: list) -> dict[str, object]:
        """Table name -> signature: replay items of `item_step_spec` steps and each control table's."""
        return {REPLAY_TABLE: tables.replay_signature(self.shape, item_step_spec),
                VARIABLES_TABLE: tables.variables_signature(policy_variables),
                REQUESTS_TABLE: tables.requests_signature(),
                RUN_SETTINGS_TABLE: tables.run_settings_signature()}

    def make_tables(self, signatures: dict[str, object], samples_per_insert: float) -> list:
        """The Reverb tables (replay and control) with these `signatures`."""
        return tables.make_tables(self.config, self.shape, signatures[REPLAY_TABLE], signatures[VARIABLES_TABLE],
                                  samples_per_insert)

    def make_writer(self, client, num_envs: int, observation_spec=None,
                    action_spec=None) -> TrajectoryStreams | BlockStreams:
        """The actor's writer of `num_envs` envs: env blocks, or one stream per env with envs_per_item 1."""
        shape = self.shape
        if shape.envs_per_item > 1:
            return BlockStreams(client, num_envs, shape.envs_per_item, observation_spec=observation_spec,
                                action_spec=action_spec, sequence_length=shape.sequence_length,
                                send_priorities=shape.actors_send_priorities)
        return TrajectoryStreams(client, num_envs, observation_spec=observation_spec, action_spec=action_spec,
                                 sequence_length=shape.sequence_length,
                                 run_past_episode_end=shape.run_past_episode_end,
                                 send_priorities=shape.actors_send_priorities)

    def finish_batch(self):
        """The graph function that turns a sampled (experience, info) into [batch, L, ...] rows to train on."""
        return unpack.finish_batch(self.shape, self.config.gamma)

    def item_td_errors(self, td_errors: np.ndarray) -> np.ndarray:
        """One TD error per sampled item from one per row (a block's largest), for its new priority."""
        return unpack.item_td_errors(td_errors, self.shape.envs_per_item)
