"""The per-env stream writer (`--envs-per-item 1`): one stream per env, item for item TF-Agents' observer's.

TF-Agents' `ReverbAddTrajectoryObserver` rejects batched trajectories, so a batched actor needs
its own writer. The semantics copied here (and checked against the observer in a test): append
every step; once >= L steps are cached (L = 2, or train_sequence_length for an RNN), each new step creates an
item of the last L; after a boundary step (LAST -> FIRST) the cache restarts, so no item spans two episodes.

n-step items (L = n + 1) follow one deliberate difference, `run_past_episode_end`: every window of L steps
that does not start on a boundary step, so the last n - 1 states of an episode start items too (see
unpack.py for why, and for the learner-side rewrite that makes those windows stop at the episode end).
For L = 2 both rules make the same items.
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


def _stream_configs(num_envs: int, fields: TrajectoryColumns, table: str, length: int, send_priorities: bool) -> list:
    """StructuredWriter configs for `num_envs` streams in one flat step.

    Env i's item is its last `length` steps, made when the step's make-item column (this writer's own column after
    the Trajectory's, computed per env in `TrajectoryStreams.append`) is 1; with `send_priorities` it carries the
    actor's priority (`item_configs`).
    """
    make_item_field = fields.count
    priority_fields = priority_slot_fields(make_item_field + 1)
    columns = priority_fields[-1] + 1 if send_priorities else make_item_field + 1
    step = [None] * (columns * num_envs)
    ref = structured_writer.create_reference_step(step)
    make_item = structured_writer.Condition.data(step)
    configs = []
    for i in range(num_envs):
        slots = [slot * num_envs + i for slot in priority_fields] if send_priorities else None
        configs += item_configs(step, ref, lambda field, i=i: field * num_envs + i, table, length,
                                make_item[make_item_field * num_envs + i] == 1, fields, slots)
    return [*configs, chunk_keeper_config(ref, table, length)]


class TrajectoryStreams(GroupedStreamWriter):
    """Writes a batch of N env steps per call as N independent trajectory streams (items of sequence_length steps).

    With `observation_spec`/`action_spec` given, every batch is checked against them before any item
    is created (one bad writer would poison the table: the server does not check signatures).
    """

    def __init__(self, client: reverb.Client, num_envs: int, table: str = REPLAY_TABLE, observation_spec=None,
                 action_spec=None, sequence_length: int = 2, run_past_episode_end: bool = False,
                 send_priorities: bool = False):
        # Reverb's StructuredWriter makes the items in C++ from patterns and conditions: one Python `append` per
        # group of envs per step instead of an append plus a create_item per env, which dominated an actor step.
        def configs(streams: int, fields: TrajectoryColumns) -> list:
            return _stream_configs(streams, fields, table, sequence_length, send_priorities)

        super().__init__(client, num_envs, num_envs, configs, sequence_length, send_priorities, observation_spec,
                         action_spec)
        self._run_past_episode_end = run_past_episode_end
        # Rule of the observer: steps of each env's current episode segment. Rule for n-step windows: a ring of
        # whether each of the last L appended steps was a boundary step (row appended % L holds step `appended`).
        self._cached_steps = np.zeros(num_envs, dtype=np.int64)
        self._recent_boundaries = np.zeros((sequence_length, num_envs), dtype=bool)

    def append(self, time_step: ts.TimeStep, action: np.ndarray, next_time_step: ts.TimeStep,
               priorities: np.ndarray | None = None) -> None:
        """Appends step t of every env: (time_step[i], action[i]) -> next_time_step[i].

        With send_priorities, `priorities[i]` is the priority of env i's item that this step completes (the
        transition from step t - 1 to `time_step`).
        """
        self._check(action, next_time_step)
        step_type = time_step.step_type
        make_item = self._make_items(step_type)
        columns = [*self.fields.of(time_step, action, next_time_step), make_item,
                   *self._priority_columns(priorities, lambda env_priorities: np.asarray(env_priorities, np.float32))]
        self._write(columns)
        self.items_created += int(np.count_nonzero(make_item))

    def _make_items(self, step_type: np.ndarray) -> np.ndarray:
        """Per env, 1 if appending this step completes an item of the last L steps, else 0 (int64 column)."""
        is_boundary = step_type == ts.StepType.LAST
        if self._run_past_episode_end:
            length = self._sequence_length
            appended = self._appended + 1  # counting this step
            self._recent_boundaries[self._appended % length] = is_boundary
            if appended < length:
                return np.zeros(self._num_envs, dtype=np.int64)
            # The window's first step was appended L - 1 appends ago, in the row the next append overwrites.
            return (~self._recent_boundaries[appended % length]).astype(np.int64)
        cached = self._cached_steps + 1
        # After a boundary step (LAST -> FIRST) the segment restarts, so no item spans two episodes.
        self._cached_steps = np.where(is_boundary, 0, cached)
        return (cached >= self._sequence_length).astype(np.int64)
