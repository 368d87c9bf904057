"""The weights wire format: one item in the `variables` table.

It holds the policy weights, their train step, the train step the actors' epsilon schedule counts from, and the
item's signature under the shared key (empty without one; dqn/remote/item_trust.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import reverb

from dqn.replay_layout.items import (
    EXPLORATION_START_KEY,
    POLICY_VARIABLES_KEY,
    SIGNATURE_KEY,
    TRAIN_STEP_KEY,
    VARIABLES_TABLE,
)


@dataclasses.dataclass(frozen=True)
class PublishedWeights:
    """Policy weights as numpy arrays plus the train step they were published at (and epsilon's start step)."""

    variables: list[np.ndarray]
    train_step: int
    exploration_start: int = 0
    signature: bytes = b""

    @property
    def exploration_step(self) -> int:
        """The step the epsilon schedule is at: train steps since the start or the learner's last reset."""
        return max(0, self.train_step - self.exploration_start)


def publish_weights(client: reverb.Client, variables: list[np.ndarray], train_step: int,
                    exploration_start: int = 0, signature: bytes = b"") -> None:
    """Replaces the single `variables` item (max_size=1, FIFO) with these weights."""
    client.insert({POLICY_VARIABLES_KEY: list(variables), TRAIN_STEP_KEY: np.int64(train_step),
                   EXPLORATION_START_KEY: np.int64(exploration_start), SIGNATURE_KEY: np.bytes_(signature)},
                  priorities={VARIABLES_TABLE: 1.0})


def sample_weights(client: reverb.Client) -> PublishedWeights:
    """The current `variables` item (blocks while the table is empty: call under a deadline)."""
    sample = next(client.sample(VARIABLES_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
    # Items written with `insert` are one timestep long: drop that leading axis.
    return PublishedWeights([np.asarray(v)[0] for v in sample.data[POLICY_VARIABLES_KEY]],
                            int(np.asarray(sample.data[TRAIN_STEP_KEY])[0]),
                            int(np.asarray(sample.data[EXPLORATION_START_KEY])[0]),
                            bytes(np.asarray(sample.data[SIGNATURE_KEY])[0]))
