"""Envs of the fair harness's action kinds, and the wrappers every side plays them through: `bench.action_kinds:<id>`.

Importing this module registers (only gymnasium and numpy are imported here, so the service's virtualenv and the
peer's both can; pettingzoo and Box2D are imported when their env is made):

- `ConnectFourVsRandom-v0`: PettingZoo's `connect_four_v3` (pettingzoo 1.27.0, a pure-Python package) played as
  `player_0`, who moves first, against random legal moves drawn from the env's own generator (so a reset seed fixes
  the opponent for a given line of play). The observation is PettingZoo's Dict: `observation` (6 x 7 x 2 int8, the
  player's and the opponent's pieces) and `action_mask` (7 int8, the columns not yet full). Reward +1 win, -1 loss,
  0 draw, at the game's end. An illegal move (a full column) is what PettingZoo's own `TerminateIllegalWrapper`
  makes it: the game ends, -1 to the player who made it.
- `MultiDiscreteLunarLander-v3`: `LunarLander-v3` with `continuous=True`, its two engine throttles discretised to
  MultiDiscrete([5, 5]) by `GridActions` (main engine: off, 62.5, 75, 87.5, 100 % power; lateral: full and 75 %
  left, off, 75 % and full right: five distinct behaviours per axis, none twice). 25 combinations: the service's
  flat layout. Chosen over Pendulum (one dimension, so not multi-discrete at all, and no DQN recipe in
  rl-baselines3-zoo) because the discrete lander is one the service's defaults were designed on and learn in a few
  minutes on two cores, and rl-baselines3-zoo has a DQN recipe for `LunarLander-v3`: the peer's recipe for the
  task. Needs Box2D (the service's box2d extra). Same episode cap (1,000) and reward threshold (200) as
  `LunarLander-v3`.

gymnasium's `Taxi-v4` is used as it is (its `info["action_mask"]`, int8, at every reset and step; moving into a
wall is allowed by the env, and pointless: the taxi stays where it is and the step costs -1).

`CountIllegal` counts the actions the env's own mask forbade (from the Dict observation or the info, whichever the
env gives), whatever any side made of the mask: every side's evaluation plays through it. `FlatActions` gives SB3's
DQN a Discrete(product) space over a MultiDiscrete env; `WithoutMask` gives MaskablePPO the observation without the
mask part (the mask reaches it through `ActionMasker` instead, as in PettingZoo's own MaskablePPO tutorial).
"""

from __future__ import annotations

import functools
import importlib

import gymnasium as gym
import numpy as np

MASK_KEY = "action_mask"
#: The main engine's and the lateral engines' commands (LunarLander's continuous action, each in [-1, 1]).
MAIN_LEVELS = (-1.0, 0.25, 0.5, 0.75, 1.0)
LATERAL_LEVELS = (-1.0, -0.75, 0.0, 0.75, 1.0)
#: The env whose rl-baselines3-zoo DQN recipe the flat DQN side uses, per env of this module.
UNDERLYING = {"MultiDiscreteLunarLander-v3": "LunarLander-v3"}


def bare_id(env_id: str) -> str:
    """The registry id of a `module:EnvId` (the module imported, so the id is registered); `env_id` without one.

    ale-py's ids (`ALE/Breakout-v5`) are registered here too: gymnasium 1.x does not load them by itself.
    """
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    if name.startswith("ALE/") and name not in gym.registry:
        import ale_py

        gym.register_envs(ale_py)
    return name


def env_mask(observation, info) -> np.ndarray | None:
    """The env's own mask of valid actions at a reset or step (bool), from the Dict observation or the info."""
    if isinstance(observation, dict) and MASK_KEY in observation:
        return np.asarray(observation[MASK_KEY]) != 0
    if isinstance(info, dict) and MASK_KEY in info:
        return np.asarray(info[MASK_KEY]) != 0
    return None


class CountIllegal(gym.Wrapper):
    """Counts the actions the env's own mask forbade when they were taken (Discrete actions only).

    The totals are the class's, summed over every instance in the process: an evaluation process plays one side's
    episodes, some of them in envs it does not make itself (the service's replay of an exported policy). `illegal`
    is this instance's own count.
    """

    illegal_total = 0
    masks_seen = False

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.legal: np.ndarray | None = None
        self.illegal = 0

    def _see(self, observation, info) -> None:
        self.legal = env_mask(observation, info)
        if self.legal is not None:
            CountIllegal.masks_seen = True

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        self._see(observation, info)
        return observation, info

    def step(self, action):
        if self.legal is not None and np.ndim(action) == 0 and not self.legal[int(action)]:
            CountIllegal.illegal_total += 1
            self.illegal += 1
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._see(observation, info)
        return observation, reward, terminated, truncated, info


def legal_actions(env: gym.Env) -> np.ndarray:
    """The env's current mask (bool) as `CountIllegal` below `env` saw it; every action where the env gives none."""
    legal = env.get_wrapper_attr("legal")
    return np.ones(env.action_space.n, bool) if legal is None else legal


class WithoutMask(gym.ObservationWrapper):
    """A Dict observation of a mask and one other part, seen as that part alone."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        parts = [key for key in env.observation_space.spaces if key != MASK_KEY]
        if len(parts) != 1:
            raise ValueError(f"expected one part beside {MASK_KEY!r}, got {parts}")
        self._part = parts[0]
        self.observation_space = env.observation_space[self._part]

    def observation(self, observation):
        return observation[self._part]


class FlatActions(gym.ActionWrapper):
    """A MultiDiscrete env acted on by Discrete(product) indices, row-major (the last dimension fastest)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._nvec = tuple(int(n) for n in np.asarray(env.action_space.nvec).ravel())
        self.action_space = gym.spaces.Discrete(int(np.prod(self._nvec)))

    def action(self, action):
        return np.asarray(np.unravel_index(int(action), self._nvec), np.int64)


class GridActions(gym.ActionWrapper):
    """A continuous Box env acted on by one index per dimension into that dimension's `levels`."""

    def __init__(self, env: gym.Env, levels: tuple[tuple[float, ...], ...]):
        super().__init__(env)
        self._levels = [np.asarray(values, np.float32) for values in levels]
        self.action_space = gym.spaces.MultiDiscrete([len(values) for values in levels])

    def action(self, action):
        return np.array([values[int(index)] for values, index in zip(self._levels, action, strict=True)],
                        np.float32)


def make_multi_discrete_lander() -> gym.Env:
    """LunarLander with continuous engines, acted on by MultiDiscrete([5, 5]) (the module docstring)."""
    from gymnasium.envs.box2d.lunar_lander import LunarLander

    return GridActions(LunarLander(continuous=True), (MAIN_LEVELS, LATERAL_LEVELS))


class ConnectFourVsRandom(gym.Env):
    """PettingZoo's Connect Four as `player_0` against random legal moves (the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self):
        from pettingzoo.classic import connect_four_v3
        from pettingzoo.utils.env_logger import EnvLogger

        EnvLogger.suppress_output()  # its warning on each illegal move: the harness counts them
        self._game = connect_four_v3.env()
        self._game.reset()
        self.observation_space = self._game.observation_space("player_0")
        self.action_space = self._game.action_space("player_0")

    def _over(self) -> bool:
        return bool(self._game.terminations["player_0"] or self._game.truncations["player_0"])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._game.reset(seed=seed)
        return self._game.observe("player_0"), {}

    def step(self, action):
        self._game.step(int(action))
        if not self._over():
            legal = np.flatnonzero(self._game.observe("player_1")[MASK_KEY])
            self._game.step(int(self.np_random.choice(legal)))
        over = self._over()
        reward = float(self._game.rewards["player_0"]) if over else 0.0
        return self._game.observe("player_0"), reward, over, False, {}


def _counted(env_id: str, **kwargs) -> gym.Env:
    return CountIllegal(gym.make(env_id, **kwargs))


def counted_id(env_id: str) -> str:
    """An id whose envs are `env_id`'s inside `CountIllegal` (for code that makes its envs from an id itself)."""
    namespace, name, version = gym.envs.registration.parse_env_id(bare_id(env_id))
    counted = f"IllegalCounted/{namespace + '.' if namespace else ''}{name}" + (
        f"-v{version}" if version is not None else "")
    if counted not in gym.registry:
        spec = gym.spec(bare_id(env_id))
        gym.register(counted, entry_point=functools.partial(_counted, env_id), reward_threshold=spec.reward_threshold,
                     disable_env_checker=True)
    return counted


def peer_env(env_id: str, algo: str, make_kwargs: dict | None = None) -> gym.Env:
    """The env a peer trains and is scored on (`gym.make(env_id, **make_kwargs)`), through `CountIllegal`.

    `dqn` as made, `dqn-flat` through `FlatActions`, `maskable-ppo` without its observation's mask part (the mask
    reaches MaskablePPO through `legal_actions`).
    """
    env = CountIllegal(gym.make(bare_id(env_id), **(make_kwargs or {})))
    if algo == "dqn-flat":
        return FlatActions(env)
    if algo == "maskable-ppo" and isinstance(env.observation_space, gym.spaces.Dict):
        return WithoutMask(env)
    return env


if "ConnectFourVsRandom-v0" not in gym.registry:
    gym.register("ConnectFourVsRandom-v0", entry_point=ConnectFourVsRandom)
if "MultiDiscreteLunarLander-v3" not in gym.registry:
    gym.register("MultiDiscreteLunarLander-v3", entry_point=make_multi_discrete_lander, max_episode_steps=1000,
                 reward_threshold=200.0)
