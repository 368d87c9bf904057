"""One trajectory stream per environment, item for item what TF-Agents' observer writes.

TF-Agents' `ReverbAddTrajectoryObserver` rejects batched trajectories, so a batched actor needs
its own writer. The semantics copied here (and checked against the observer in a test): append
every step; once >= L steps are cached (L = 2, or train_sequence_length for an RNN), each new step creates an
item of the last L; after a boundary step (LAST -> FIRST) the cache restarts, so no item spans two episodes.

n-step items (L = n + 1) follow one deliberate difference, `run_past_episode_end`: every window of L steps
that does not start on a boundary step, so the last n - 1 states of an episode start items too (see
dqn/nstep.py for why, and for the learner-side rewrite that makes those windows stop at the episode end).
For L = 2 both rules make the same items.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np
import reverb
from reverb import structured_writer
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from dqn.agent import INITIAL_PRIORITY_KEY
from dqn.config import SEQUENCE_LENGTH
from dqn.replay import REPLAY_TABLE

#: Envs per StructuredWriter (see TrajectoryStreams.__init__ for why groups stay this small).
ENVS_PER_WRITER = 8
#: Unconfirmed items one writer may hold before the actor waits, whatever max_pending_items * its streams is:
#: Reverb logs "pending items is alarmingly high" on every append once a writer holds ~50 (measured), and
#: up to ENVS_PER_WRITER items join between two waits.
MAX_PENDING_PER_WRITER = 32
#: Steps a chunk may span. StructuredWriter sizes its chunks by its longest pattern (here 2 steps): chunks that
#: short cost the replay server ~4.5 KB per CartPole transition; 8-step chunks ~2.5 KB (bench/scaling.py).
CHUNK_STEPS = 8
#: Columns of one appended step per env, column-major in the flat step: the 6 Trajectory leaves, "make an item",
#: and with actor priorities two priority slots (see `_stream_configs`).
_TRAJECTORY_FIELDS = 6
_MAKE_ITEM = 6
_PRIORITY_SLOTS = (7, 8)


class InvalidItem(ValueError):
    """A step that does not match the table's specs: refused before anything is sent."""


def _stream_configs(num_envs: int, table: str, priority: float, length: int, send_priorities: bool) -> list:
    """StructuredWriter configs for `num_envs` streams in one flat step.

    Env i's item is its last `length` steps, made when the step's make-item column (computed per env in
    `TrajectoryStreams.append`) is 1; with `send_priorities` it carries the actor's priority (`item_configs`).
    """
    fields = len(_PRIORITY_SLOTS) + _MAKE_ITEM + 1 if send_priorities else _MAKE_ITEM + 1
    step = [None] * (fields * num_envs)
    ref = structured_writer.create_reference_step(step)
    make_item = structured_writer.Condition.data(step)
    configs = []
    for i in range(num_envs):
        slots = [slot * num_envs + i for slot in _PRIORITY_SLOTS] if send_priorities else None
        configs += item_configs(step, ref, lambda field, i=i: field * num_envs + i, table, length,
                                make_item[_MAKE_ITEM * num_envs + i] == 1, slots, priority)
    return [*configs, chunk_keeper_config(ref, table, length)]


def item_configs(step: list, ref, column, table: str, length: int, made, slots: list[int] | None = None,
                 priority: float = 1.0) -> list:
    """Configs that make one stream's item, a Trajectory of its last `length` steps, whenever `made` holds.

    `column(field)` is the flat position of the stream's Trajectory field. Without `slots` the item enters at
    the constant `priority`. With two slot positions (2-step items only) it enters at the actor's priority,
    through Reverb's td_error priority function, which takes the max of a column over the item's steps. Adjacent
    items share a step, so one column cannot hold a value per item: items starting on even steps read slot 0
    and items starting on odd steps slot 1. Each slot is 0 at an item's first step and the item's priority at
    its second, so the max is exactly that priority. The item carries its slot as policy_info (the function
    reads the item's own columns).
    """
    leaf = [ref[column(field)][-length:] for field in range(_TRAJECTORY_FIELDS)]

    def item(policy_info):
        return trajectory.Trajectory(step_type=leaf[0], observation=leaf[1], action=leaf[2], policy_info=policy_info,
                                     next_step_type=leaf[3], reward=leaf[4], discount=leaf[5])

    if slots is None:
        return [structured_writer.create_config(item(()), table, conditions=[made],
                                                priority=structured_writer.constant_priority_fn(priority))]
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


def check_batch(observation: np.ndarray, action: np.ndarray, num_envs: int, observation_spec, action_spec) -> None:
    """Vectorized checks of one batch of env steps: observation dtype/shape, action dtype/range, finiteness.

    A spec of None skips its check. Raises InvalidItem before anything is sent.
    """
    if observation_spec is not None:
        expected = (num_envs, *observation_spec.shape)
        if observation.dtype != observation_spec.dtype or observation.shape != expected:
            raise InvalidItem(f"observation batch {observation.dtype}{observation.shape} does not match the "
                              f"table's {observation_spec.dtype}{expected}")
        if observation.dtype.kind == "f" and not np.isfinite(observation).all():
            raise InvalidItem("observation batch contains NaN or infinity")
    if action_spec is not None:
        if action.dtype != action_spec.dtype or action.shape != (num_envs,):
            raise InvalidItem(f"action batch {action.dtype}{action.shape} does not match {action_spec.dtype}")
        if action.min() < action_spec.minimum or action.max() > action_spec.maximum:
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


class TrajectoryStreams:
    """Writes a batch of N env steps per call as N independent trajectory streams (items of sequence_length steps).

    With `observation_spec`/`action_spec` given, every batch is checked against them before any item
    is created (one bad writer would poison the table: the server does not check signatures).
    """

    def __init__(self, client: reverb.Client, num_envs: int, table: str = REPLAY_TABLE, priority: float = 1.0,
                 observation_spec=None, action_spec=None, sequence_length: int = SEQUENCE_LENGTH,
                 run_past_episode_end: bool = False, send_priorities: bool = False):
        # Reverb's StructuredWriter makes the items in C++ from patterns and conditions: one Python `append` per
        # group of envs per step instead of an append plus a create_item per env (those two took ~70 % of an
        # actor step). Groups stay small because Reverb logs "pending items is alarmingly high" on every append
        # once a writer holds ~60 unconfirmed items (max_pending_items * group + group must stay below that).
        self._sequence_length = sequence_length  # n + 1 steps per item (n-step returns)
        self._run_past_episode_end = run_past_episode_end
        # Rule of the observer: steps of each env's current episode segment. Rule for n-step windows: a ring of
        # whether each of the last L appended steps was a boundary step (row appended % L holds step `appended`).
        self._cached_steps = np.zeros(num_envs, dtype=np.int64)
        self._recent_boundaries = np.zeros((sequence_length, num_envs), dtype=bool)
        self._appended = 0
        self._num_envs = num_envs
        if send_priorities and sequence_length != 2:
            raise ValueError("actor priorities are for 2-step items (n_step_update 1, no RNN)")
        self._send_priorities = send_priorities
        self._no_priorities = np.zeros(num_envs, dtype=np.float32)  # an opening slot's value, never written to
        self._groups = [slice(start, min(start + ENVS_PER_WRITER, num_envs))
                        for start in range(0, num_envs, ENVS_PER_WRITER)]
        self._writers = [client.structured_writer(_stream_configs(group.stop - group.start, table, priority,
                                                                  sequence_length, send_priorities))
                         for group in self._groups]
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self.items_created = 0

    def append(self, time_step: ts.TimeStep, action: np.ndarray, next_time_step: ts.TimeStep,
               priorities: np.ndarray | None = None) -> None:
        """Appends step t of every env: (time_step[i], action[i]) -> next_time_step[i].

        With send_priorities, `priorities[i]` is the priority of env i's item that this step completes (the
        transition from step t - 1 to `time_step`).
        """
        check_batch(next_time_step.observation, action, self._num_envs, self._observation_spec, self._action_spec)
        step_type = time_step.step_type
        make_item = self._make_items(step_type)
        columns = (step_type, time_step.observation, action, next_time_step.step_type, next_time_step.reward,
                   next_time_step.discount, make_item)
        if self._send_priorities:
            if priorities is None or np.shape(priorities) != (self._num_envs,):
                raise InvalidItem(f"send_priorities needs one priority per env ({self._num_envs}); got "
                                  f"{None if priorities is None else np.shape(priorities)}")
            # Slot k % 2 opens the items starting at this step (0); the other slot closes the item started
            # one step earlier with its priority (see _stream_configs).
            opening = self._no_priorities
            closing = np.asarray(priorities, dtype=np.float32)
            columns += (opening, closing) if self._appended % 2 == 0 else (closing, opening)
        self._appended += 1
        for group, writer in zip(self._groups, self._writers, strict=True):
            # Column-major flat step (field by field, env by env): iterating an array yields its rows as numpy
            # scalars/arrays of the right dtype without any per-value conversion in Python.
            writer.append([value for column in columns for value in column[group]])
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
        """Flushes what it can within one overall deadline, then closes the streams.

        Items still unconfirmed then (e.g. held back by the rate limiter after the learner stopped)
        are dropped: they were never stored, so nothing stored is lost.
        """
        close_writers(self._writers, timeout_ms)
        self._writers = []
