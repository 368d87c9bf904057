"""gymnasium -> TF-Agents adapter (TF-Agents 0.19's suite_gym only knows gym <= 0.23).

Mapping: `terminated` -> termination (discount 0), `truncated` -> truncation (discount 1),
`reset(seed=...)` seeds. The batched form wraps a gymnasium vector env in NEXT_STEP autoreset
mode: the step after an episode end returns the reset observation (reward 0) and ignores the
action, which is exactly TF-Agents' FIRST step after a LAST one, so no step is lost or invented.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from dqn.errors import BadInput


class EnvError(BadInput, ValueError):
    """An environment that cannot be used with DQN; the message says why and what to use."""


def make_gym_env(env_id: str, **kwargs: Any) -> gym.Env:
    """`gym.make` with a clear error for unknown ids and unsupported spaces."""
    try:
        env = gym.make(env_id, **kwargs)
    except gym.error.Error as error:
        raise EnvError(f"unknown gymnasium env id {env_id!r}: {error}") from None
    try:
        check_spaces(env_id, env.observation_space, env.action_space)
    except EnvError:
        env.close()
        raise
    return env


def check_spaces(env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
    """DQN needs a Discrete action space and a Box observation space."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise EnvError(f"env {env_id!r} has action space {action_space}; DQN needs a Discrete action space "
                       "(for continuous control use an actor-critic algorithm, or discretize the actions)")
    if not isinstance(observation_space, gym.spaces.Box):
        raise EnvError(f"env {env_id!r} has observation space {observation_space}; a Box observation "
                       "space is required (wrap it, e.g. with gymnasium.wrappers.FlattenObservation)")


def observation_spec(space: gym.spaces.Box) -> array_spec.BoundedArraySpec:
    """TF-Agents spec of a Box observation space."""
    return array_spec.BoundedArraySpec(space.shape, space.dtype, minimum=space.low, maximum=space.high,
                                       name="observation")


def action_spec(space: gym.spaces.Discrete) -> array_spec.BoundedArraySpec:
    """TF-Agents spec of a Discrete action space: int64 scalar in [start, start + n - 1]."""
    start = int(space.start)
    return array_spec.BoundedArraySpec((), np.int64, minimum=start, maximum=start + int(space.n) - 1,
                                       name="action")


@functools.lru_cache(maxsize=32)
def env_specs(env_id: str) -> tuple[array_spec.BoundedArraySpec, array_spec.BoundedArraySpec, float | None]:
    """(observation spec, action spec, reward threshold) of an env id, validated; built once per process."""
    env = make_gym_env(env_id)
    try:
        return observation_spec(env.observation_space), action_spec(env.action_space), env.spec.reward_threshold
    finally:
        env.close()


class GymnasiumEnvironment(py_environment.PyEnvironment):
    """One gymnasium env as a TF-Agents PyEnvironment (auto-reset after LAST is TF-Agents' own)."""

    def __init__(self, env_id: str, seed: int | None = None, **make_kwargs: Any):
        super().__init__(handle_auto_reset=True)
        self._env = make_gym_env(env_id, **make_kwargs)
        self._observation_spec = observation_spec(self._env.observation_space)
        self._action_spec = action_spec(self._env.action_space)
        self._seed = seed
        self._dtype = self._observation_spec.dtype

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
        return ts.restart(np.asarray(observation, dtype=self._dtype))

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        observation, reward, terminated, truncated, _ = self._env.step(int(action))
        observation = np.asarray(observation, dtype=self._dtype)
        reward = np.asarray(reward, dtype=np.float32)
        if terminated:
            return ts.termination(observation, reward)
        if truncated:
            return ts.truncation(observation, reward)
        return ts.transition(observation, reward)

    def close(self) -> None:
        """Closes the gymnasium env."""
        self._env.close()


class GymnasiumVectorEnvironment(py_environment.PyEnvironment):
    """N gymnasium envs stepped together (gymnasium SyncVectorEnv) as a batched PyEnvironment."""

    def __init__(self, env_id: str, num_envs: int, seed: int | None = None, **make_kwargs: Any):
        super().__init__(handle_auto_reset=False)  # the vector env resets finished envs itself
        env_specs(env_id)  # validates the id and spaces before building N copies
        self._vector_env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP},
                                        **make_kwargs)
        self._num_envs = num_envs
        self._observation_spec = observation_spec(self._vector_env.single_observation_space)
        self._action_spec = action_spec(self._vector_env.single_action_space)
        self._dtype = self._observation_spec.dtype
        self._seed = seed
        self._episode_ended = np.zeros(num_envs, dtype=bool)

    @property
    def batched(self) -> bool:
        """Always True: one step advances every env."""
        return True

    @property
    def batch_size(self) -> int:
        """Number of parallel envs."""
        return self._num_envs

    def observation_spec(self) -> array_spec.BoundedArraySpec:
        """Spec of one env's observation."""
        return self._observation_spec

    def action_spec(self) -> array_spec.BoundedArraySpec:
        """Spec of one env's action."""
        return self._action_spec

    def _reset(self) -> ts.TimeStep:
        observation, _ = self._vector_env.reset(seed=self._seed)
        self._seed = None
        self._episode_ended[:] = False
        return ts.restart(np.asarray(observation, dtype=self._dtype), batch_size=self._num_envs)

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        observation, reward, terminated, truncated, _ = self._vector_env.step(np.asarray(action))
        return self.time_step_from_gym(observation, reward, terminated, truncated)

    def time_step_from_gym(self, observation: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
                           truncated: np.ndarray) -> ts.TimeStep:
        """Batched TimeStep for one vector-env step (envs that ended last step are now FIRST)."""
        restarted = self._episode_ended
        ended = np.logical_or(terminated, truncated)
        step_type = np.where(ended, ts.StepType.LAST, ts.StepType.MID).astype(np.int32)
        step_type[restarted] = ts.StepType.FIRST
        discount = np.where(terminated & ~restarted, 0.0, 1.0).astype(np.float32)
        reward = np.where(restarted, 0.0, reward).astype(np.float32)
        self._episode_ended = ended & ~restarted
        return ts.TimeStep(step_type, reward, discount, np.asarray(observation, dtype=self._dtype))

    def close(self) -> None:
        """Closes all envs."""
        self._vector_env.close()
