"""What both actor-side writers share: StructuredWriter item patterns, batch checks, backpressure and close.

Both writers append one flat step per group of streams (a stream is one env, or one block of envs) and let
Reverb's StructuredWriter make the items in C++ from patterns and conditions. A stream's columns in the flat
step are column-major (field by field, stream by stream): first the Trajectory's columns (`TrajectoryColumns`:
one per observation part), then each writer's own columns, then with actor priorities the `PRIORITY_SLOTS` (see
`item_configs` for why there are two).
"""

from __future__ import annotations

import ctypes
import time

import numpy as np
import reverb
import tensorflow as tf
from reverb import structured_writer
from tf_agents.trajectories import trajectory

from dqn.replay_layout.items import INITIAL_PRIORITY_KEY

#: Streams (envs, or blocks of envs) per StructuredWriter. Groups stay small because Reverb logs "pending items is
#: alarmingly high" on every append once one writer holds a few dozen unconfirmed items.
STREAMS_PER_WRITER = 8
#: Unconfirmed items one writer may hold before the actor waits, whatever max_pending_items * its streams is:
#: below Reverb's warning level, with room for the up to STREAMS_PER_WRITER items that join between two waits.
MAX_PENDING_PER_WRITER = 32
#: Steps a chunk may span. StructuredWriter sizes its chunks by its longest pattern (here 2 steps), and chunks that
#: short cost the replay server more memory per stored transition (each chunk carries its own overhead;
#: `bench/replay_bytes.py` measures the bytes per transition).
CHUNK_STEPS = 8
#: Priority columns per stream when actors send priorities: two, because adjacent 2-step items share a step
#: (`item_configs`).
PRIORITY_SLOTS = 2


def priority_slot_fields(first: int) -> list[int]:
    """The field numbers of a stream's priority slots when they follow `first` fields of other columns."""
    return list(range(first, first + PRIORITY_SLOTS))


class TrajectoryColumns:
    """Where the Trajectory's fields sit at the start of every stream's columns.

    In order: step_type, each observation part, action, next_step_type, reward, discount (policy_info is not
    appended: it is empty, or the priority slots). A nested (Dict/Tuple) observation takes one column per part,
    in `tf.nest.flatten` order; without a spec the observation is one column.
    """

    def __init__(self, observation_spec=None):
        self._observation_spec = observation_spec
        self._parts = 1 if observation_spec is None else len(tf.nest.flatten(observation_spec))
        self._nested = observation_spec is not None and tf.nest.is_nested(observation_spec)
        self.count = 5 + self._parts

    def of(self, time_step, action, next_time_step) -> list:
        """The column values of one batched step, in column order."""
        observation = tf.nest.flatten(time_step.observation) if self._nested else [time_step.observation]
        return [time_step.step_type, *observation, action, next_time_step.step_type, next_time_step.reward,
                next_time_step.discount]

    def trajectory(self, leaves: list, policy_info) -> trajectory.Trajectory:
        """A Trajectory (of references) from values in column order."""
        observation = leaves[1:1 + self._parts]
        if self._nested:
            observation = tf.nest.pack_sequence_as(self._observation_spec, observation)
        else:
            observation = observation[0]
        step_type, (action, next_step_type, reward, discount) = leaves[0], leaves[1 + self._parts:]
        return trajectory.Trajectory(step_type=step_type, observation=observation, action=action,
                                     policy_info=policy_info, next_step_type=next_step_type, reward=reward,
                                     discount=discount)


class InvalidItem(ValueError):
    """A step that does not match the table's specs: refused before anything is sent."""


def item_configs(step: list, ref, column, table: str, length: int, made, fields: TrajectoryColumns,
                 slots: list[int] | None = None) -> list:
    """Configs that make one stream's item, a Trajectory of its last `length` steps, whenever `made` holds.

    `column(field)` is the flat position of the stream's Trajectory field. Without `slots` the item enters at
    priority 1. With two slot positions (2-step items only) it enters at the actor's priority,
    through Reverb's td_error priority function, which takes the max of a column over the item's steps. Adjacent
    items share a step, so one column cannot hold a value per item: items starting on even steps read slot 0
    and items starting on odd steps slot 1. Each slot is 0 at an item's first step and the item's priority at
    its second, so the max is exactly that priority. The item carries its slot as policy_info (the function
    reads the item's own columns).
    """
    leaves = [ref[column(field)][-length:] for field in range(fields.count)]

    def item(policy_info):
        return fields.trajectory(leaves, policy_info)

    if slots is None:
        return [structured_writer.create_config(item(()), table, conditions=[made],
                                                priority=structured_writer.constant_priority_fn(1.0))]
    return [structured_writer.create_config(
        item({INITIAL_PRIORITY_KEY: ref[slot][-length:]}), table,
        # Made at step k, the item starts at k - 1: its start parity is (k + 1) % 2.
        conditions=[made, structured_writer.Condition.step_index() % 2 == (parity + 1) % 2],
        # max_priority_weight 1: the priority is the slot's max over the item's two steps.
        priority=structured_writer.td_error(1.0, step, lambda flat, slot=slot: flat[slot]))
        for parity, slot in enumerate(slots)]


def chunk_keeper_config(ref, table: str, length: int):
    """A pattern that never fires (step_index < 0), only to keep CHUNK_STEPS steps alive per column.

    The writer may then build chunks that long; the backpressure flush still finalizes chunks early when it must.
    """
    return structured_writer.create_config(
        [ref[0][-max(CHUNK_STEPS, length):]], table, conditions=[structured_writer.Condition.step_index() < 0])


def check_batch(observation, action: np.ndarray, num_envs: int, observation_spec, action_spec) -> None:
    """Vectorized checks of one batch of env steps: observation dtypes/shapes, action dtype/range, finiteness.

    A spec of None skips its check. Raises InvalidItem before anything is sent.
    """
    if observation_spec is not None:
        try:
            tf.nest.assert_same_structure(observation, observation_spec)
        except (TypeError, ValueError):
            raise InvalidItem(f"observation batch is not shaped like the table's {observation_spec}") from None
        for part, spec in zip(tf.nest.flatten(observation), tf.nest.flatten(observation_spec), strict=True):
            expected = (num_envs, *spec.shape)
            if part.dtype != spec.dtype or part.shape != expected:
                raise InvalidItem(f"observation batch {part.dtype}{part.shape} does not match the "
                                  f"table's {spec.dtype}{expected}")
            if part.dtype.kind == "f" and not np.isfinite(part).all():
                raise InvalidItem("observation batch contains NaN or infinity")
    if action_spec is not None:
        if action.dtype != action_spec.dtype or action.shape != (num_envs, *action_spec.shape):
            raise InvalidItem(f"action batch {action.dtype}{action.shape} does not match {action_spec.dtype}"
                              f"{(num_envs, *action_spec.shape)}")
        if action_spec.shape:  # a vector per env (branching): bounds per dimension
            outside = np.any(action < action_spec.minimum) or np.any(action > action_spec.maximum)
        else:
            outside = action.min() < action_spec.minimum or action.max() > action_spec.maximum
        if outside:
            raise InvalidItem(f"actions outside [{action_spec.minimum}, {action_spec.maximum}]: {action}")


def close_writers(writers: list, timeout_ms: int) -> None:
    """Flushes what it can within one overall deadline, then lets go of the writers.

    Items still unconfirmed then (e.g. held back by the rate limiter after the learner stopped)
    are dropped: they were never stored, so nothing stored is lost.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    confirmed = False
    try:
        for writer in writers:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                break
            writer.flush(timeout_ms=remaining_ms)
        else:
            confirmed = True
    except reverb.errors.DeadlineExceededError:
        pass
    finally:
        # A StructuredWriter has no close(), and freeing one that still holds unconfirmed items waits for them
        # forever with the GIL held (Reverb 0.14): such writers are kept alive on purpose, never freed, even at
        # exit; the process's exit drops their connections. Writers with everything confirmed are freed.
        if not confirmed:
            for writer in writers:
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(writer))


def wait_for_writers(writers: list, pending_items: list[int], timeout_ms: int) -> bool:
    """Waits until each writer holds at most its number of unconfirmed items; False if the deadline passed.

    A writer's number is capped at MAX_PENDING_PER_WRITER.
    """
    try:
        for writer, pending in zip(writers, pending_items, strict=True):
            writer.flush(block_until_num_items=min(pending, MAX_PENDING_PER_WRITER), timeout_ms=timeout_ms)
    except reverb.errors.DeadlineExceededError:
        return False
    return True


class GroupedStreamWriter:
    """What both writers share: StructuredWriters over groups of streams, priority slots, backpressure, close.

    A stream is one env (`env_stream_writer.py`) or one block of envs (`env_block_writer.py`); each group of up to
    STREAMS_PER_WRITER streams has its own StructuredWriter, made from `make_configs(streams in the group,
    the TrajectoryColumns)`.
    """

    def __init__(self, client: reverb.Client, num_envs: int, num_streams: int, make_configs, sequence_length: int,
                 send_priorities: bool, observation_spec=None, action_spec=None):
        if send_priorities and sequence_length != 2:
            raise ValueError("actor priorities are for 2-step items (n_step_update 1, no RNN)")
        self._num_envs = num_envs
        self._sequence_length = sequence_length
        self._send_priorities = send_priorities
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self.fields = TrajectoryColumns(observation_spec)
        self._groups = [slice(start, min(start + STREAMS_PER_WRITER, num_streams))
                        for start in range(0, num_streams, STREAMS_PER_WRITER)]
        self._writers = [client.structured_writer(make_configs(group.stop - group.start, self.fields))
                         for group in self._groups]
        self._no_priorities = np.zeros(num_streams, dtype=np.float32)  # an opening slot's value, never written to
        self._appended = 0
        self.items_created = 0

    def _check(self, action: np.ndarray, next_time_step) -> None:
        """Refuses a batch that does not match the specs before anything is sent (the server checks nothing)."""
        check_batch(next_time_step.observation, action, self._num_envs, self._observation_spec, self._action_spec)

    def _priority_columns(self, priorities: np.ndarray | None, per_stream) -> list[np.ndarray]:
        """The two priority slot columns of this step (none without actor priorities).

        Slot k % 2 opens the items starting at this step (0); the other slot closes the item started one step
        earlier with its priority (`item_configs`). `per_stream` maps one priority per env to one per stream.
        """
        if not self._send_priorities:
            return []
        if priorities is None or np.shape(priorities) != (self._num_envs,):
            raise InvalidItem(f"send_priorities needs one priority per env ({self._num_envs}); got "
                              f"{None if priorities is None else np.shape(priorities)}")
        closing = per_stream(priorities)
        return [self._no_priorities, closing] if self._appended % 2 == 0 else [closing, self._no_priorities]

    def _write(self, columns: list) -> None:
        """Appends one flat step per group: column-major (field by field, stream by stream).

        Iterating an array yields its rows as numpy scalars/arrays of the right dtype without any per-value
        conversion in Python.
        """
        self._appended += 1
        for group, writer in zip(self._groups, self._writers, strict=True):
            writer.append([value for column in columns for value in column[group]])

    def wait_for_server(self, max_pending_per_stream: int, timeout_ms: int) -> bool:
        """Backpressure: waits until the streams hold at most this many unconfirmed items each (on average).

        The replay rate limiter holds inserts back while the learner is behind; without this wait the
        writers would queue items in memory without bound. False if the deadline passed first.
        """
        return wait_for_writers(self._writers, [max_pending_per_stream * (group.stop - group.start)
                                                for group in self._groups], timeout_ms)

    def flush(self, timeout_ms: int) -> None:
        """Waits until every created item is confirmed by the server (raises DeadlineExceededError)."""
        for writer in self._writers:
            writer.flush(timeout_ms=timeout_ms)

    def close(self, timeout_ms: int = 5000) -> None:
        """Flushes what it can within one overall deadline (`close_writers`), then lets go of the writers."""
        close_writers(self._writers, timeout_ms)
        self._writers = []
