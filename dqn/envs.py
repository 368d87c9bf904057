"""gymnasium -> TF-Agents adapter (TF-Agents 0.19's suite_gym only knows gym <= 0.23).

Mapping: `terminated` -> termination (discount 0), `truncated` -> truncation (discount 1),
`reset(seed=...)` seeds. The batched form wraps a gymnasium vector env in NEXT_STEP autoreset
mode: the step after an episode end returns the reset observation (reward 0) and ignores the
action, which is exactly TF-Agents' FIRST step after a LAST one, so no step is lost or invented.

Atari ids (ale-py's `AtariEnv`, e.g. `ALE/Breakout-v5`) get the book's preprocessing in every role:
`AtariPreprocessing` (no-op starts, frame skip with max-pooling, 84x84 grayscale) and a frame stack,
laid out channels-last as uint8 (H, W, stack) so Conv2D reads it and replay stores bytes, not floats.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from dqn.env_faults import EnvFault, RecoveringEnv, RestartBudget
from dqn.errors import BadInput


class EnvError(BadInput, ValueError):
    """An environment that cannot be used with DQN; the message says why and what to use."""


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """How every role makes an env beyond its id; hashable, because `env_specs` is cached on it.

    The defaults change nothing for non-Atari ids: CartPole is made exactly as `gym.make(env_id)`.
    Field meanings and sources: the fields of the same names in `dqn.config.CommonConfig`.
    """

    max_episode_steps: int = 0
    atari_noop_max: int = 30
    atari_frame_skip: int = 4
    atari_screen_size: int = 84
    atari_grayscale: bool = True
    atari_terminal_on_life_loss: bool = False
    atari_frame_stack: int = 4
    atari_repeat_action_probability: float = 0.25

    @classmethod
    def from_config(cls, config: Any) -> EnvOptions:
        """The options held by a config (its fields of the same names)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


DEFAULT_OPTIONS = EnvOptions()


@functools.cache
def _register_atari() -> bool:
    """Registers ale-py's ids with gymnasium (1.x no longer does it by itself); False without ale-py."""
    try:
        import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)
    return True


def is_atari(env_id: str) -> bool:
    """True for ids whose env is ale-py's AtariEnv (ALE/Breakout-v5, BreakoutNoFrameskip-v4, ...)."""
    if env_id not in gym.registry:
        _register_atari()
    spec = gym.registry.get(env_id)
    return spec is not None and spec.entry_point == "ale_py.env:AtariEnv"


class StackedFramesLast(gym.ObservationWrapper):
    """(stack, H, W[, C]) -> (H, W, stack * C): channels last, the layout Keras' Conv2D expects."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(self.observation(space.low), self.observation(space.high),
                                                dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """Moves the stack axis last and merges it with the color channels, if any."""
        stacked = np.moveaxis(np.asarray(observation), 0, -1)
        return np.ascontiguousarray(stacked.reshape(*stacked.shape[:2], -1))


def _make_kwargs(env_id: str, options: EnvOptions, kwargs: dict[str, Any]) -> dict[str, Any]:
    """gym.make keyword arguments for `env_id` under `options` (explicit kwargs win)."""
    kwargs = dict(kwargs)
    if is_atari(env_id):
        # AtariPreprocessing skips frames itself, max-pooling the last two (the Nature paper's flicker fix);
        # ALE-v5's built-in frameskip=4 would compound to 16 frames per action, so the ALE env must not skip.
        kwargs.setdefault("frameskip", 1)
        kwargs.setdefault("repeat_action_probability", options.atari_repeat_action_probability)
    return kwargs


def env_wrappers(env_id: str, options: EnvOptions) -> list[Callable[[gym.Env], gym.Env]]:
    """Wrappers applied to each made env, innermost first; none for non-Atari ids with default options."""
    wrappers: list[Callable[[gym.Env], gym.Env]] = []
    if is_atari(env_id):
        wrappers += [
            lambda env: gym.wrappers.AtariPreprocessing(
                env, noop_max=options.atari_noop_max, frame_skip=options.atari_frame_skip,
                screen_size=options.atari_screen_size, terminal_on_life_loss=options.atari_terminal_on_life_loss,
                grayscale_obs=options.atari_grayscale),
            lambda env: gym.wrappers.FrameStackObservation(env, options.atari_frame_stack),
            StackedFramesLast,
        ]
    if options.max_episode_steps:
        # Outermost, so the limit counts agent steps (an inner TimeLimit on Atari would count raw frames).
        wrappers.append(lambda env: gym.wrappers.TimeLimit(env, options.max_episode_steps))
    return wrappers


def make_gym_env(env_id: str, options: EnvOptions | None = None, **kwargs: Any) -> gym.Env:
    """`gym.make` plus the wrappers of `options`, with a clear error for unknown ids and unsupported spaces."""
    options = options or DEFAULT_OPTIONS
    try:
        env = gym.make(env_id, **_make_kwargs(env_id, options, kwargs))
    except gym.error.Error as error:
        raise EnvError(f"unknown gymnasium env id {env_id!r}: {error}") from None
    for wrapper in env_wrappers(env_id, options):
        env = wrapper(env)
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
    low, high = space.low, space.high
    if len(space.shape) == 3 and (low == low.flat[0]).all() and (high == high.flat[0]).all():
        low, high = low.flat[0], high.flat[0]  # images: scalar bounds, not 2 x 28k numbers in every table signature
    return array_spec.BoundedArraySpec(space.shape, space.dtype, minimum=low, maximum=high, name="observation")


def action_spec(space: gym.spaces.Discrete) -> array_spec.BoundedArraySpec:
    """TF-Agents spec of a Discrete action space: int64 scalar in [start, start + n - 1]."""
    start = int(space.start)
    return array_spec.BoundedArraySpec((), np.int64, minimum=start, maximum=start + int(space.n) - 1,
                                       name="action")


@functools.lru_cache(maxsize=32)
def env_specs(env_id: str, options: EnvOptions = DEFAULT_OPTIONS
              ) -> tuple[array_spec.BoundedArraySpec, array_spec.BoundedArraySpec, float | None]:
    """(observation spec, action spec, reward threshold) of an env id as wrapped by `options`, validated.

    Built once per process and (id, options) pair; pass `EnvOptions.from_config(config)` so every role
    derives the same preprocessed spaces.
    """
    env = make_gym_env(env_id, options)
    try:
        return observation_spec(env.observation_space), action_spec(env.action_space), env.spec.reward_threshold
    finally:
        env.close()


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
        kwargs = _make_kwargs(env_id, options, make_kwargs)
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
