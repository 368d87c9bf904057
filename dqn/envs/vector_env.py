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
import tensorflow as tf
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from dqn.envs.call_timer import EnvCallTimer
from dqn.envs.faults import RESET_ATTEMPTS, EnvFailed, EnvFault, RecoveringEnv, RestartBudget
from dqn.envs.making import DEFAULT_OPTIONS, EnvOptions, env_specs, env_wrappers, gym_make_kwargs
from dqn.envs.spaces import action_spec, is_nested, observation_converter, observation_spec


class GymnasiumVectorEnvironment(py_environment.PyEnvironment):
    """N gymnasium envs stepped together (gymnasium SyncVectorEnv) as a batched PyEnvironment.

    A sub-env that raises is recreated and reset (dqn/envs/faults.py): its step comes back as a truncation,
    `faulted` marks it, `restarts` counts it, and each fault is logged once with its traceback. More than
    `max_restarts` restarts within `restart_window` env steps raise EnvFailed (None: no limit). `first_step_fault`
    holds, per sub-env, the vector step (since the last reset) of its first step that raised, -1 if none, so the
    evaluator can tell which episodes a fault cut short without any per-step bookkeeping here; only the first
    matters, because a faulted step ends its episode.

    `infos` is each sub-env's info of the last step (in NEXT_STEP mode, the step that ends an episode carries that
    episode's final info, the next one the reset's). Only a caller that asks (`keep_final_infos`, the evaluator)
    gets `final_infos`: each sub-env's final info of its first episode since the last reset, kept by the step
    itself, so a loop that steps the env inside TF sees them too.
    """

    def __init__(self, env_id: str, num_envs: int, seed: int | None = None, options: EnvOptions | None = None,
                 max_restarts: int | None = None, restart_window: int = 10_000, call_timeout_s: float = 0.0,
                 **make_kwargs: Any):
        super().__init__(handle_auto_reset=False)  # the vector env resets finished envs itself
        options = options or DEFAULT_OPTIONS
        self.action_form = env_specs(env_id, options).actions  # validates the id and spaces before building N copies
        kwargs = gym_make_kwargs(env_id, options, make_kwargs)
        wrappers = env_wrappers(env_id, options)

        def make_env() -> gym.Env:  # what make_vec builds per sub-env: gym.make, then the wrappers
            env = gym.make(env_id, **kwargs)
            for wrapper in wrappers:
                env = wrapper(env)
            return env

        self._faults: list[EnvFault] = []
        self._timer = EnvCallTimer(call_timeout_s)
        index = itertools.count()  # SyncVectorEnv makes its sub-envs in order: the n-th made is sub-env n
        self._sub_envs: list[RecoveringEnv] = []

        def recovering(env: gym.Env) -> RecoveringEnv:
            sub_env = RecoveringEnv(env, make_env, next(index), self._faults, env_id, self._timer)
            self._sub_envs.append(sub_env)
            return sub_env

        self._vector_env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP},
                                        wrappers=[*wrappers, recovering], **kwargs)
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
        self._convert = observation_converter(self._observation_spec)
        self._nested = is_nested(self._observation_spec)
        self._float_parts = [i for i, spec in enumerate(tf.nest.flatten(self._observation_spec))
                             if np.issubdtype(spec.dtype, np.floating)]
        self._seed = seed
        self._episode_ended = np.zeros(num_envs, dtype=bool)
        self._observation: Any = None  # the last batch handed out: every env's last finite observation
        self.final_infos: list[dict | None] | None = None  # None: not kept (the actor's envs)

    @property
    def batched(self) -> bool:
        """Always True: one step advances every env."""
        return True

    @property
    def batch_size(self) -> int:
        """Number of parallel envs."""
        return self._num_envs

    @property
    def env_id(self) -> str:
        """The gymnasium id of the envs."""
        return self._env_id

    @property
    def infos(self) -> list[dict]:
        """Each sub-env's info of the last step or reset (the env's own dicts, not copies)."""
        return [sub_env.info for sub_env in self._sub_envs]

    def keep_final_infos(self) -> None:
        """From now on, `final_infos[i]` is sub-env i's final info of its first episode since the last reset.

        None until that episode ends. A step that an env fault ended carries an empty info.
        """
        self.final_infos = [None] * self._num_envs

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
        with self._timer:
            observation, _ = self._vector_env.reset(seed=self._seed)
        self._seed = None
        self._episode_ended[:] = False
        self.first_step_fault[:] = -1
        self._steps_at_reset = self._steps
        if self.final_infos is not None:
            self.final_infos = [None] * self._num_envs
        observation = self._convert(observation)
        if not self._all_finite(observation, np.zeros(self._num_envs)):
            observation = self._reset_non_finite(observation)
        self._take_faults()
        self._observation = observation
        return ts.restart(observation, batch_size=self._num_envs)

    def _reset_non_finite(self, observation: Any) -> Any:
        """Sub-envs whose reset observation is not finite are recreated and reset again, RESET_ATTEMPTS times."""
        for _ in range(RESET_ATTEMPTS):
            bad = self._non_finite_envs(observation, np.zeros(self._num_envs))
            if not bad:
                return observation
            for index, what in bad.items():
                sub_env = self._sub_envs[index]
                sub_env.mark_non_finite(what, None)
                with self._timer:  # this reset is a call into the env too: it gets the same deadline
                    fresh = self._convert(sub_env.reset()[0])
                observation = tf.nest.map_structure(_with_row(index), observation, fresh)
        bad = self._non_finite_envs(observation, np.zeros(self._num_envs))
        if bad:
            index, what = next(iter(bad.items()))
            raise EnvFailed(f"env {self._env_id!r} (sub-env {index}) returned a non-finite {what} at reset "
                            f"{RESET_ATTEMPTS + 1} times in a row, recreated each time. Fix the env")
        return observation

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        with self._timer:
            observation, reward, terminated, truncated, _ = self._vector_env.step(np.asarray(action))
        self._steps += self._num_envs
        observation = self._convert(observation)
        if not self._all_finite(observation, reward):
            observation, reward, truncated = self._drop_non_finite(observation, reward, truncated)
        self._take_faults()
        self._observation = observation
        time_step = self.time_step_from_gym(observation, reward, terminated, truncated)
        if self.final_infos is not None:
            self._keep_first_final_infos(time_step.step_type)
        return time_step

    def _keep_first_final_infos(self, step_type: np.ndarray) -> None:
        """Keeps the info of each sub-env whose first episode since the reset ended at this step."""
        for index in np.flatnonzero(step_type == ts.StepType.LAST):
            if self.final_infos[index] is None:
                # A copy: the env may reuse its dict, and this one must stay as the episode left it.
                self.final_infos[index] = dict(self._sub_envs[index].info)

    def _all_finite(self, observation: Any, reward: np.ndarray) -> bool:
        """One vectorized check of the batch (the float parts of the observation and the rewards)."""
        if not np.isfinite(reward).all():
            return False
        if not self._float_parts:
            return True
        if not self._nested:
            return bool(np.isfinite(observation).all())
        parts = tf.nest.flatten(observation)
        return all(np.isfinite(parts[i]).all() for i in self._float_parts)

    def _non_finite_envs(self, observation: Any, reward: np.ndarray) -> dict[int, str]:
        """Sub-env index -> what was not finite ("reward", "observation", or both)."""
        bad: dict[int, list[str]] = {}
        for index in np.flatnonzero(~np.isfinite(reward)):
            bad.setdefault(int(index), []).append("reward")
        parts = tf.nest.flatten(observation)
        for i in self._float_parts:
            rows = ~np.isfinite(parts[i].reshape(self._num_envs, -1)).all(axis=1)
            for index in np.flatnonzero(rows):
                if "observation" not in bad.setdefault(int(index), []):
                    bad[int(index)].append("observation")
        return {index: " and ".join(what) for index, what in bad.items()}

    def _drop_non_finite(self, observation: Any, reward: np.ndarray, truncated: np.ndarray) -> tuple:
        """NaN or infinity is an env fault, handled like an exception of the env.

        The step ends the episode as a truncation with the env's last finite observation and reward 0, and the
        sub-env is recreated before its next step.
        """
        bad = self._non_finite_envs(observation, reward)
        rows = np.zeros(self._num_envs, dtype=bool)
        rows[list(bad)] = True
        previous = self._observation
        observation = tf.nest.map_structure(
            lambda new, old: np.where(rows.reshape((-1,) + (1,) * (new.ndim - 1)), old, new), observation, previous)
        for index, what in bad.items():
            self._sub_envs[index].mark_non_finite(what, tf.nest.map_structure(lambda part, i=index: part[i].copy(),
                                                                               previous))
        # A restarting env's FIRST step cannot end its episode: it becomes a LAST step of the last good observation.
        self._episode_ended[rows] = False
        return observation, np.where(rows, 0.0, reward), np.asarray(truncated) | rows

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
        return ts.TimeStep(step_type, reward, discount, observation)

    def close(self) -> None:
        """Closes all envs."""
        self._vector_env.close()


def _with_row(index: int):
    """A function (batch part, one env's part) -> the batch part with row `index` replaced."""
    def replace(batch: np.ndarray, row: np.ndarray) -> np.ndarray:
        batch = np.array(batch, copy=True)
        batch[index] = row
        return batch
    return replace
