"""The env-block writer (the default): the same n + 1 steps of a block of E envs in one [n + 1, E, ...] item.

Reverb's cost is per item: a 2-step item of one env holds one transition, so a learner sampling such items pays
`TrajectoryDataset`'s per-item work (sampling, decoding, batching) for every transition, which for a small
network outweighs the SGD step itself. A block of E envs' transitions at the same time steps costs about the same
per item, so blocks divide the learner's input cost by
about E, and the actor's writes (one append per step for all envs) with it.

What changes against per-env streams (env_stream_writer.py): every window of n + 1 steps becomes an item, also
the ones starting on an env's boundary step (LAST -> FIRST). DqnAgent masks those itself: its loss keeps only
transitions whose first step is not LAST (`valid_mask`), and unpack.py closes windows that run past an
episode end. Sampling, priorities and FIFO removal act on whole blocks: an actor-sent initial priority is
the largest of the block's envs' priorities.
"""

from __future__ import annotations

import numpy as np
import reverb
from reverb import structured_writer
from tf_agents.trajectories import time_step as ts

from dqn.replay_layout.items import REPLAY_TABLE
from dqn.replay_layout.writing import (
    GroupedStreamWriter,
    TrajectoryColumns,
    chunk_keeper_config,
    item_configs,
    priority_slot_fields,
)


def _block_configs(num_blocks: int, fields: TrajectoryColumns, table: str, length: int, send_priorities: bool) -> list:
    """StructuredWriter configs for `num_blocks` blocks in one flat step (field-major: field * num_blocks + b).

    Block b's item is the last `length` steps of its Trajectory columns, made on every step once `length` steps
    exist. A block has no column of its own: with `send_priorities` (2-step items only) two scalar slots per
    block follow the Trajectory's columns and carry the item's priority (writing.item_configs explains the
    alternation); the item carries its slot as policy_info["initial_priority"] ([L], one value per step for the
    whole block).
    """
    priority_fields = priority_slot_fields(fields.count)
    columns = priority_fields[-1] + 1 if send_priorities else fields.count
    step = [None] * (columns * num_blocks)
    ref = structured_writer.create_reference_step(step)
    full = structured_writer.Condition.step_index() >= length - 1
    configs = []
    for b in range(num_blocks):
        slots = [slot * num_blocks + b for slot in priority_fields] if send_priorities else None
        configs += item_configs(step, ref, lambda field, b=b: field * num_blocks + b, table, length, full, fields,
                                slots)
    return [*configs, chunk_keeper_config(ref, table, length)]


class BlockStreams(GroupedStreamWriter):
    """Writes a batch of N env steps per call as N / E block streams (items of sequence_length steps of E envs).

    Same interface as `env_stream_writer.TrajectoryStreams`; with specs given, every batch is checked first.
    """

    def __init__(self, client: reverb.Client, num_envs: int, envs_per_item: int, table: str = REPLAY_TABLE,
                 observation_spec=None, action_spec=None, sequence_length: int = 2, send_priorities: bool = False):
        if num_envs % envs_per_item:
            raise ValueError(f"num_envs {num_envs} is not a multiple of envs_per_item {envs_per_item}")
        self._envs_per_item = envs_per_item
        self._num_blocks = num_envs // envs_per_item
        super().__init__(client, num_envs, self._num_blocks,
                         lambda blocks, fields: _block_configs(blocks, fields, table, sequence_length, send_priorities),
                         sequence_length, send_priorities, observation_spec, action_spec)

    def block_priorities(self, env_priorities: np.ndarray) -> np.ndarray:
        """One priority per block from one per env: the block's largest (its most surprising transition)."""
        return np.asarray(env_priorities, dtype=np.float32).reshape(self._num_blocks, self._envs_per_item).max(1)

    def append(self, time_step: ts.TimeStep, action: np.ndarray, next_time_step: ts.TimeStep,
               priorities: np.ndarray | None = None) -> None:
        """Appends step t of every env: (time_step[i], action[i]) -> next_time_step[i].

        With send_priorities, `priorities[i]` is the priority of env i's transition that this step completes
        (from step t - 1 to `time_step`); its block's item gets the block's largest.
        """
        self._check(action, next_time_step)
        blocks = (self._num_blocks, self._envs_per_item)
        columns = [np.asarray(column).reshape(blocks + np.shape(column)[1:])
                   for column in self.fields.of(time_step, action, next_time_step)]
        self._write([*columns, *self._priority_columns(priorities, self.block_priorities)])
        if self._appended >= self._sequence_length:
            self.items_created += self._num_blocks
