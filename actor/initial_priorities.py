"""Ape-X initial priorities: each new item's |TD error| from the actor's own Q-values (initial_priority=td_error).

For env i's transition t -> t + 1 (reward r, discount d): δ = r + γ·d·max_a Q(s_{t+1}, a) − Q(s_t, a_t). The
actor computes Q(s_{t+1}) anyway to choose a_{t+1}, so the priority of the item that step t + 1 completes
costs one gather and one max per env, scaled like the learner's updates (dqn/replay_layout/priority_scale.py).
For a branching Q-network (vector actions) it is the learner's own TD error: the target takes the mean over
dimensions of each one's max, and the priority is the mean over dimensions of |target - Q_d(s_t, a_d)|.
"""

from __future__ import annotations

import numpy as np

from dqn.model.actions import max_q_values, taken_q_values
from dqn.replay_layout.priority_scale import PriorityScale


class InitialPriorities:
    """Per env, the priority of the transition that ends at the latest observation."""

    def __init__(self, num_envs: int, gamma: float):
        self._num_envs = num_envs
        self._gamma = gamma
        self._scale = PriorityScale()
        self._q_taken: np.ndarray | None = None  # Q(s_t, a_t) of the previous step, None if unknown
        self._reward = np.zeros(num_envs, dtype=np.float64)
        self._discount = np.zeros(num_envs, dtype=np.float64)

    def closing(self, q_values: np.ndarray | None, mask: np.ndarray | None = None) -> np.ndarray:
        """Priorities of the transitions ending at the observations `q_values` [N, A] were computed for.

        The target's max is over the actions `mask` [N, A] allows at those observations (None: all).
        1.0 (the top of the scale) where no TD error is known: warm-up steps with random actions (None) and
        the first step after them.
        """
        if q_values is None or self._q_taken is None:
            return np.ones(self._num_envs, dtype=np.float32)
        best = max_q_values(q_values, mask)
        if best.ndim > 1:  # branching: per dimension
            best = best.mean(axis=1)
        target = self._reward + self._gamma * self._discount * best
        if self._q_taken.ndim > 1:
            return self._scale(np.abs(target[:, None] - self._q_taken).mean(axis=1)).astype(np.float32)
        return self._scale(target - self._q_taken).astype(np.float32)

    def taken(self, q_values: np.ndarray | None, action: np.ndarray, reward: np.ndarray,
              discount: np.ndarray) -> None:
        """Remembers Q(s_t, a_t) and the transition's reward and discount for the next `closing` call."""
        if q_values is None:
            self._q_taken = None
            return
        self._q_taken = taken_q_values(q_values, action).astype(np.float64)
        self._reward = np.asarray(reward, dtype=np.float64)
        self._discount = np.asarray(discount, dtype=np.float64)
