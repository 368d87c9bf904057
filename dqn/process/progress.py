"""Episode bookkeeping and small progress files (`progress.json`) that `local` and `status` read.

Progress files are a local convenience for the launcher's live line; no role reads another's.
"""

from __future__ import annotations

import collections
import json
import os
import time
from typing import Any

import numpy as np
from tf_agents.trajectories import time_step as ts

from dqn.files import atomic_write


class EpisodeStats:
    """Returns and lengths of finished episodes across a batch of envs (recent window of 100)."""

    def __init__(self, num_envs: int, window: int = 100):
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=window)
        self.recent_lengths: collections.deque[int] = collections.deque(maxlen=window)
        self.episodes = 0

    def update(self, time_step: ts.TimeStep, dropped: np.ndarray | None = None) -> None:
        """Accounts one batched step (the reward on a FIRST step belongs to no episode).

        Episodes that end on a `dropped` env (its env raised and was recreated) are not counted.
        """
        first = time_step.step_type == ts.StepType.FIRST
        self._returns[first] = 0.0
        self._lengths[first] = 0
        self._returns[~first] += time_step.reward[~first]
        self._lengths[~first] += 1
        ended = time_step.step_type == ts.StepType.LAST
        if dropped is not None:
            ended &= ~dropped
        for i in np.flatnonzero(ended):
            self.recent_returns.append(float(self._returns[i]))
            self.recent_lengths.append(int(self._lengths[i]))
            self.episodes += 1

    def average_return(self) -> float:
        """Mean return of the recent finished episodes."""
        return float(np.mean(self.recent_returns)) if self.recent_returns else 0.0

    def average_length(self) -> float:
        """Mean length of the recent finished episodes."""
        return float(np.mean(self.recent_lengths)) if self.recent_lengths else 0.0


def write_progress(directory: str, **values: Any) -> None:
    """Atomically replaces `<directory>/progress.json` with these values and a timestamp."""
    os.makedirs(directory, exist_ok=True)
    with atomic_write(os.path.join(directory, "progress.json"), durable=False) as handle:
        json.dump({**values, "time": time.time()}, handle)


#: The replay server's latest bottleneck verdict, beside its progress file (for `local` and `status --root-dir`).
VERDICT_FILE = "verdict.json"


def read_progress(directory: str, name: str = "progress.json") -> dict[str, Any]:
    """The last progress values written in `directory` (or its file `name`), or {} if none yet."""
    try:
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
