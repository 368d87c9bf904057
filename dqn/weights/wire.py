"""The weights wire format: one item in the `variables` table, the policy weights plus their train step."""

from __future__ import annotations

import dataclasses

import numpy as np
import reverb

from dqn.replay_layout.items import POLICY_VARIABLES_KEY, TRAIN_STEP_KEY, VARIABLES_TABLE


@dataclasses.dataclass(frozen=True)
class PublishedWeights:
    """Policy weights as numpy arrays plus the train step they were published at."""

    variables: list[np.ndarray]
    train_step: int


def publish_weights(client: reverb.Client, variables: list[np.ndarray], train_step: int) -> None:
    """Replaces the single `variables` item (max_size=1, FIFO) with these weights."""
    client.insert({POLICY_VARIABLES_KEY: list(variables), TRAIN_STEP_KEY: np.int64(train_step)},
                  priorities={VARIABLES_TABLE: 1.0})


def sample_weights(client: reverb.Client) -> PublishedWeights:
    """The current `variables` item (blocks while the table is empty: call under a deadline)."""
    sample = next(client.sample(VARIABLES_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
    # Items written with `insert` are one timestep long: drop that leading axis.
    return PublishedWeights([np.asarray(v)[0] for v in sample.data[POLICY_VARIABLES_KEY]],
                            int(np.asarray(sample.data[TRAIN_STEP_KEY])[0]))
