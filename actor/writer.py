"""One 2-step trajectory stream per environment, item for item what TF-Agents' observer writes.

TF-Agents' `ReverbAddTrajectoryObserver` rejects batched trajectories, so a batched actor needs
its own writer. The semantics copied here (and checked against the observer in a test): append
every step; once >= 2 steps are cached, each new step creates an item of the last 2; after a
boundary step (LAST -> FIRST) the cache restarts, so no item spans two episodes.
"""

from __future__ import annotations

import time

import numpy as np
import reverb
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from dqn.config import SEQUENCE_LENGTH
from dqn.replay import REPLAY_TABLE


class InvalidItem(ValueError):
    """A step that does not match the table's specs: refused before anything is sent."""


class TrajectoryStreams:
    """Writes a batch of N env steps per call as N independent 2-step trajectory streams.

    With `observation_spec`/`action_spec` given, every batch is checked against them before any item
    is created (one bad writer would poison the table: the server does not check signatures).
    """

    def __init__(self, client: reverb.Client, num_envs: int, table: str = REPLAY_TABLE, priority: float = 1.0,
                 observation_spec=None, action_spec=None):
        # validate_items=False: with validation on, the writer asks the server for the signature and blocks
        # while the server is down; the actor checks specs against the table once, at start-up.
        self._writers = [client.trajectory_writer(num_keep_alive_refs=SEQUENCE_LENGTH + 1, validate_items=False)
                         for _ in range(num_envs)]
        self._cached_steps = np.zeros(num_envs, dtype=np.int64)
        self._table = table
        self._priority = priority
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self.items_created = 0

    def _validate(self, observation: np.ndarray, action: np.ndarray) -> None:
        """Vectorized checks of one batch: observation dtype/shape, action dtype/range, finiteness."""
        obs_spec, act_spec = self._observation_spec, self._action_spec
        if obs_spec is not None:
            expected = (len(self._writers), *obs_spec.shape)
            if observation.dtype != obs_spec.dtype or observation.shape != expected:
                raise InvalidItem(f"observation batch {observation.dtype}{observation.shape} does not match the "
                                  f"table's {obs_spec.dtype}{expected}")
            if observation.dtype.kind == "f" and not np.isfinite(observation).all():
                raise InvalidItem("observation batch contains NaN or infinity")
        if act_spec is not None:
            if action.dtype != act_spec.dtype or action.shape != (len(self._writers),):
                raise InvalidItem(f"action batch {action.dtype}{action.shape} does not match {act_spec.dtype}")
            if action.min() < act_spec.minimum or action.max() > act_spec.maximum:
                raise InvalidItem(f"actions outside [{act_spec.minimum}, {act_spec.maximum}]: {action}")

    def append(self, time_step: ts.TimeStep, action: np.ndarray, next_time_step: ts.TimeStep) -> None:
        """Appends step t of every env: (time_step[i], action[i]) -> next_time_step[i]."""
        self._validate(next_time_step.observation, action)
        step_type, observation = time_step.step_type, time_step.observation
        next_step_type, reward, discount = next_time_step.step_type, next_time_step.reward, next_time_step.discount
        for i, writer in enumerate(self._writers):
            writer.append(trajectory.Trajectory(
                step_type=step_type[i], observation=observation[i], action=action[i], policy_info=(),
                next_step_type=next_step_type[i], reward=reward[i], discount=discount[i]))
            self._cached_steps[i] += 1
            if self._cached_steps[i] >= SEQUENCE_LENGTH:
                history = writer.history
                writer.create_item(self._table, self._priority, trajectory.Trajectory(
                    step_type=history.step_type[-SEQUENCE_LENGTH:],
                    observation=history.observation[-SEQUENCE_LENGTH:],
                    action=history.action[-SEQUENCE_LENGTH:],
                    policy_info=(),
                    next_step_type=history.next_step_type[-SEQUENCE_LENGTH:],
                    reward=history.reward[-SEQUENCE_LENGTH:],
                    discount=history.discount[-SEQUENCE_LENGTH:]))
                self.items_created += 1
            if step_type[i] == ts.StepType.LAST:  # this step was the boundary LAST -> FIRST
                self._cached_steps[i] = 0

    def wait_for_server(self, max_pending_per_stream: int, timeout_ms: int) -> bool:
        """Backpressure: waits until each stream has at most this many unconfirmed items.

        The replay rate limiter holds inserts back while the learner is behind; without this wait the
        writers would queue items in memory without bound. False if the deadline passed first.
        """
        try:
            for writer in self._writers:
                writer.flush(block_until_num_items=max_pending_per_stream, timeout_ms=timeout_ms)
        except reverb.errors.DeadlineExceededError:
            return False
        return True

    def flush(self, timeout_ms: int) -> None:
        """Waits until every created item is confirmed by the server (raises DeadlineExceededError)."""
        for writer in self._writers:
            writer.flush(timeout_ms=timeout_ms)

    def close(self, timeout_ms: int = 5000) -> None:
        """Flushes what it can within one overall deadline, then closes the streams.

        Items still unconfirmed then (e.g. held back by the rate limiter after the learner stopped)
        are dropped: they were never stored, so nothing stored is lost.
        """
        deadline = time.monotonic() + timeout_ms / 1000
        try:
            for writer in self._writers:
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    break
                writer.flush(timeout_ms=remaining_ms)
        except reverb.errors.DeadlineExceededError:
            pass
        finally:
            for writer in self._writers:
                writer.close()
