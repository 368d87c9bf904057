"""One gymnasium env as a TF-Agents PyEnvironment: the reference the service's batched env is measured against.

The service steps envs only in batches (`dqn/envs/vector_env.py`), so nothing in it uses this. The book's loop and
the stock actor drive one env with `PyDriver` and write through `ReverbAddTrajectoryObserver`, which takes unbatched
steps only, and TF-Agents 0.19 wraps `gym`, not gymnasium: this adapter lets them run on a gymnasium env
(bench/book_loop.py, bench/actor_throughput.py). Tests use it as the single-env semantics that each column of the
batched env must follow (tests may import bench; bench never imports tests).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from dqn.envs.making import EnvOptions, make_gym_env
from dqn.envs.spaces import action_spec, observation_converter, observation_spec


class GymnasiumEnvironment(py_environment.PyEnvironment):
    """One gymnasium env as a TF-Agents PyEnvironment (auto-reset after LAST is TF-Agents' own)."""

    def __init__(self, env_id: str, seed: int | None = None, options: EnvOptions | None = None, **make_kwargs: Any):
        super().__init__(handle_auto_reset=True)
        self._env = make_gym_env(env_id, options, **make_kwargs)
        self._observation_spec = observation_spec(self._env.observation_space)
        self._action_spec = action_spec(self._env.action_space)
        self._seed = seed
        self._convert = observation_converter(self._observation_spec)

    @property
    def gym(self) -> gym.Env:
        """The wrapped gymnasium env."""
        return self._env

    def observation_spec(self) -> array_spec.BoundedArraySpec:
        """Spec of observations."""
        return self._observation_spec

    def action_spec(self) -> array_spec.BoundedArraySpec:
        """Spec of actions."""
        return self._action_spec

    def _reset(self) -> ts.TimeStep:
        # The seed applies to the first reset only; later resets continue the same RNG stream.
        observation, _ = self._env.reset(seed=self._seed)
        self._seed = None
        return ts.restart(self._convert(observation))

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        observation, reward, terminated, truncated, _ = self._env.step(int(action))
        observation = self._convert(observation)
        reward = np.asarray(reward, dtype=np.float32)
        if terminated:
            return ts.termination(observation, reward)
        if truncated:
            return ts.truncation(observation, reward)
        return ts.transition(observation, reward)

    def close(self) -> None:
        """Closes the gymnasium env."""
        self._env.close()


