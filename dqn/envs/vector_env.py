"""gymnasium -> TF-Agents: N gymnasium envs stepped together as one batched PyEnvironment.

TF-Agents 0.19's suite_gym only knows gym <= 0.23. Mapping: `terminated` -> termination (discount 0),
`truncated` -> truncation (discount 1), `reset(seed=...)` seeds. The gymnasium vector env runs in NEXT_STEP
autoreset mode: the step after an episode end returns the reset observation (reward 0) and ignores the
action, which is exactly TF-Agents' FIRST step after a LAST one, so no step is lost or invented.
"""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from dqn.envs.faults import EnvFault, RecoveringEnv, RestartBudget
from dqn.envs.making import DEFAULT_OPTIONS, EnvOptions, env_specs, env_wrappers, gym_make_kwargs
from dqn.envs.spaces import action_spec, observation_spec


class GymnasiumVectorEnvironment(py_environment.PyEnvironment):
    """N gymnasium envs stepped together (gymnasium SyncVectorEnv) as a batched PyEnvironment.

    A sub-env that raises is recreated and reset (dqn/env_faults.py): its step comes back as a truncation,
    `faulted` marks it, `restarts` counts it, and each fault is logged once with its traceback. More than
    `max_restarts` restarts within `restart_window` env steps raise EnvFailed (None: no limit). `first_step_fault`
    holds, per sub-env, the vector step (since the last reset) of its first step that raised, -1 if none, so the
    evaluator can tell which episodes a fault cut short without any per-step bookkeeping here; only the first
    matters, because a faulted step ends its episode.
    """

    def __init__(self, env_id: str, num_envs: int, seed: int | None = None, options: EnvOptions | None = None,
                 max_restarts: int | None = None, restart_window: int = 10_000, **make_kwargs: Any):
        super().__init__(handle_auto_reset=False)  # the vector env resets finished envs itself
        options = options or DEFAULT_OPTIONS
        env_specs(env_id, options)  # validates the id and spaces before building N copies
        kwargs = gym_make_kwargs(env_id, options, make_kwargs)
        wrappers = env_wrappers(env_id, options)

        def make_env() -> gym.Env:  # what make_vec builds per sub-env: gym.make, then the wrappers
            env = gym.make(env_id, **kwargs)
            for wrapper in wrappers:
                env = wrapper(env)
            return env

        self._faults: list[EnvFault] = []
        index = itertools.count()  # SyncVectorEnv makes its sub-envs in order: the n-th made is sub-env n
        self._vector_env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP},
                                        wrappers=[*wrappers, lambda env: RecoveringEnv(env, make_env, next(index),
                                                                                        self._faults, env_id)],
                                        **kwargs)
        self._env_id = env_id
        self._budget = RestartBudget(env_id, max_restarts, restart_window)
        self._steps = 0
        self.restarts = 0
        self.faulted = np.zeros(num_envs, dtype=bool)
        self.first_step_fault = np.full(num_envs, -1, dtype=np.int64)
        self._steps_at_reset = 0
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

    def reseed(self, seed: int | None) -> None:
        """The next reset seeds the envs with `seed` (env i gets seed + i), so it starts the same episodes again."""
        self._seed = seed

    def _reset(self) -> ts.TimeStep:
        observation, _ = self._vector_env.reset(seed=self._seed)
        self._seed = None
        self._episode_ended[:] = False
        self.first_step_fault[:] = -1
        self._steps_at_reset = self._steps
        self._take_faults()
        return ts.restart(np.asarray(observation, dtype=self._dtype), batch_size=self._num_envs)

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        observation, reward, terminated, truncated, _ = self._vector_env.step(np.asarray(action))
        self._steps += self._num_envs
        self._take_faults()
        return self.time_step_from_gym(observation, reward, terminated, truncated)

    def _take_faults(self) -> None:
        """Logs and counts the faults of the last reset or step; `faulted` marks envs whose step raised."""
        faults, self._faults[:] = list(self._faults), []
        self.faulted = np.zeros(self._num_envs, dtype=bool)
        for fault in faults:  # each already logged with its traceback by the sub-env
            self.restarts += 1
            if fault.phase == "step":
                self.faulted[fault.index] = True
                if self.first_step_fault[fault.index] < 0:
                    self.first_step_fault[fault.index] = (self._steps - self._steps_at_reset) // self._num_envs
        self._budget.charge(faults, self._steps)

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
