"""Small user envs of every observation kind and misbehaviour, registered as `tests.user_envs:<id>`.

Each is a short task with a learnable signal: the reward is 1 when the action matches a bit of the observation,
so every part of the observation must reach the Q-network for the greedy policy to score well.

- BoolGrid-v0: a (6, 6, 2) bool grid (a MinAtar-like image of object channels).
- FloatGrid-v0: the same grid as float32.
- ChannelsFirst-v0: a (2, 12, 12) uint8 image, channels first.
- CodeGrid-v0: a (5, 5, 3) uint8 grid of category codes 0-11 in a Box declared 0-255 (as MiniGrid's view); the bit
  is the parity of the centre cell's first code, which codes divided by 255 hide.
- StateIndex-v0: a Discrete(8) state index.
- MultiDiscreteObs-v0 / MultiBinaryObs-v0: vectors of indices / bits.
- DictObs-v0: {"image": (8, 8, 3) uint8, "position": Discrete(5), "velocity": Box(2)} (image + vector).
- TupleObs-v0: (Discrete(4), Box(3) float64).
- TextObs-v0: a Text observation (refused at start).
- NaNCartPole-v0 / NaNRewardCartPole-v0: CartPole returning NaN in the observation / reward once in ~1,000 steps.
- HangingCartPole-v0 / OftenHangingCartPole-v0: CartPole whose step blocks for good (as on a dead socket) once in
  ~50,000 / ~3,000 steps; AlwaysHangingCartPole-v0 on its first step.
- Endless-v0: match the bit on a float vector for ever (no episode end, no registered limit).
- SlowCartPole-v0: CartPole taking 2 ms a step (a simulator far slower than the learner).
- SometimesSucceeds-v0: a goal env reporting `is_success` in every step's info (as gymnasium-robotics' goal envs);
  the episodes started by a seed divisible by 4 succeed, whatever the actions: a quarter of 4k consecutive seeds.
- Alternate-v0: 1 for each action that differs from the one before, 20 steps, an observation that never changes:
  random play scores about 10, and any greedy policy (one action for ever) at most 1.
"""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class MatchTheBit(gym.Env):
    """Two actions; reward 1 when the action equals the hidden bit the observation encodes; `episode_steps` long."""

    def __init__(self, observation_space: gym.Space, encode, episode_steps: int | None = 20):
        self.episode_steps = episode_steps
        self.observation_space = observation_space
        self.action_space = gym.spaces.Discrete(2)
        self._encode = encode
        self._bit = 0
        self._steps = 0

    def _observe(self):
        self._bit = int(self.np_random.integers(2))
        return self._encode(self._bit, self.np_random)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._steps = 0
        return self._observe(), {}

    def step(self, action):
        reward = 1.0 if int(action) == self._bit else 0.0
        self._steps += 1
        return self._observe(), reward, False, self.episode_steps is not None and self._steps >= self.episode_steps, {}


def _grid(bit, rng, dtype=np.bool_, shape=(6, 6, 2)):
    grid = np.zeros(shape, dtype)
    grid[rng.integers(shape[0]), rng.integers(shape[1]), bit] = 1
    return grid


def _channels_first(bit, rng):
    image = np.zeros((2, 12, 12), np.uint8)
    image[bit, rng.integers(12), rng.integers(12)] = 255
    return image


def _code_grid(bit, rng):
    grid = rng.integers(0, 12, (5, 5, 3)).astype(np.uint8)
    grid[2, 2, 0] = 2 * rng.integers(1, 6) + bit
    return grid


def _dict(bit, rng):
    image = rng.integers(0, 50, (8, 8, 3)).astype(np.uint8)
    return {"image": image, "position": int(2 * bit + rng.integers(2)),
            "velocity": rng.normal(0, 1, 2).astype(np.float32)}


SPACES = {
    "BoolGrid-v0": (gym.spaces.Box(0, 1, (6, 6, 2), np.bool_), _grid),
    "FloatGrid-v0": (gym.spaces.Box(0.0, 1.0, (6, 6, 2), np.float32), lambda b, r: _grid(b, r, np.float32)),
    "ChannelsFirst-v0": (gym.spaces.Box(0, 255, (2, 12, 12), np.uint8), _channels_first),
    "CodeGrid-v0": (gym.spaces.Box(0, 255, (5, 5, 3), np.uint8), _code_grid),
    "StateIndex-v0": (gym.spaces.Discrete(8), lambda b, r: int(4 * b + r.integers(4))),
    "MultiDiscreteObs-v0": (gym.spaces.MultiDiscrete([3, 4, 5]),
                            lambda b, r: np.array([r.integers(3), 2 * b + r.integers(2), r.integers(5)])),
    "MultiBinaryObs-v0": (gym.spaces.MultiBinary(4), lambda b, r: np.array([b, *r.integers(0, 2, 3)], np.int8)),
    "DictObs-v0": (gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                                    "position": gym.spaces.Discrete(5),
                                    "velocity": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)}), _dict),
    "TupleObs-v0": (gym.spaces.Tuple((gym.spaces.Discrete(4), gym.spaces.Box(-1.0, 1.0, (3,), np.float64))),
                    lambda b, r: (int(2 * b + r.integers(2)), r.uniform(-1, 1, 3))),
    "TextObs-v0": (gym.spaces.Text(8), lambda b, r: "ab" if b else "ba"),
}


def make_match_env(name: str) -> MatchTheBit:
    """The MatchTheBit env of one SPACES entry."""
    space, encode = SPACES[name]
    return MatchTheBit(space, encode)


def make_endless_env() -> MatchTheBit:
    """MatchTheBit on a one-hot float pair whose episodes never end."""
    return MatchTheBit(gym.spaces.Box(0.0, 1.0, (2,), np.float32),
                       lambda bit, _: np.eye(2, dtype=np.float32)[bit], episode_steps=None)


class NaNCartPole(CartPoleEnv):
    """CartPole whose observation (or reward) is NaN on a step with probability 1 / `every` (a sim blowing up)."""

    def __init__(self, every: int = 5000, where: str = "observation", **kwargs):
        super().__init__(**kwargs)
        self.every, self.where = every, where

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if self.np_random.random() < 1 / self.every:
            if self.where == "observation":
                observation = np.full_like(observation, np.nan)
            else:
                reward = float("nan")
        return observation, reward, terminated, truncated, info


class HangingCartPole(CartPoleEnv):
    """CartPole whose step blocks for good (a wait that never ends) with probability 1 / `every` per step."""

    def __init__(self, every: int = 50_000, **kwargs):
        super().__init__(**kwargs)
        self.every = every

    def step(self, action):
        if self.np_random.random() < 1 / self.every:
            threading.Event().wait()  # never set: as a simulator waiting on a dead socket
        return super().step(action)


class SlowCartPole(CartPoleEnv):
    """CartPole whose step takes `step_s` seconds longer (a simulator that is slow, not stuck)."""

    def __init__(self, step_s: float = 0.002, **kwargs):
        super().__init__(**kwargs)
        self.step_s = step_s

    def step(self, action):
        time.sleep(self.step_s)
        return super().step(action)


class IdleRoom(gym.Env):
    """A corridor with its goal at the far end and three actions that change nothing (MiniGrid's pick up, drop, done).

    Actions: 0 left, 1 right, 2-4 idle. The observation is the one-hot position; reward 1 - 0.9 * steps / 40 at
    the goal (as MiniGrid scores), 0 elsewhere.
    """

    LENGTH, MAX_STEPS = 8, 40

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.LENGTH,), np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.position = self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.steps = int(self.np_random.integers(0, 4)), 0
        return np.eye(self.LENGTH, dtype=np.float32)[self.position], {}

    def step(self, action):
        self.steps += 1
        if action < 2:
            self.position = min(max(self.position + (1 if action == 1 else -1), 0), self.LENGTH - 1)
        at_goal = self.position == self.LENGTH - 1
        reward = 1 - 0.9 * self.steps / self.MAX_STEPS if at_goal else 0.0
        observation = np.eye(self.LENGTH, dtype=np.float32)[self.position]
        return observation, reward, at_goal, self.steps >= self.MAX_STEPS and not at_goal, {}


class SometimesSucceeds(gym.Env):
    """Episodes of 3-5 steps whose success the reset fixes: a seed divisible by 4 (or a draw, unseeded) succeeds.

    Every step's info has `is_success`: False until the last step, which says whether the episode succeeded (and
    earns 1 if so); the reset's info has none. A metric that read any info but the episode's final one would see
    no success or no key at all.
    """

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.succeeds, self.length, self.steps = False, 3, 0

    def _observe(self):
        return np.array([self.steps / self.length, self.succeeds], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        draw = seed if seed is not None else int(self.np_random.integers(1 << 30))
        self.succeeds, self.length, self.steps = draw % 4 == 0, 3 + draw % 3, 0
        return self._observe(), {}

    def step(self, action):
        self.steps += 1
        ended = self.steps >= self.length
        success = ended and self.succeeds
        return self._observe(), float(success), ended, False, {"is_success": success}


class Alternate(gym.Env):
    """Rewards switching actions, behind a constant observation: no policy of the observation beats random play."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.last = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.last = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        reward = float(int(action) != self.last)
        self.last = int(action)
        return np.zeros(2, np.float32), reward, False, False, {}


def _register() -> None:
    for name in SPACES:
        if name not in gym.registry:
            gym.register(name, entry_point=make_match_env, kwargs={"name": name}, reward_threshold=19.0)
    if "Endless-v0" not in gym.registry:
        gym.register("Endless-v0", entry_point=make_endless_env)
    for name, entry, kwargs in (("NaNCartPole-v0", NaNCartPole, {"every": 1000}),
                                ("NaNRewardCartPole-v0", NaNCartPole, {"every": 1000, "where": "reward"}),
                                ("HangingCartPole-v0", HangingCartPole, {}),
                                ("OftenHangingCartPole-v0", HangingCartPole, {"every": 3000}),
                                ("AlwaysHangingCartPole-v0", HangingCartPole, {"every": 1}),
                                ("SlowCartPole-v0", SlowCartPole, {})):
        if name not in gym.registry:
            gym.register(name, entry_point=entry, kwargs=kwargs, max_episode_steps=500, reward_threshold=475.0)
    if "IdleRoom-v0" not in gym.registry:  # an optimal walk scores 0.84-0.91; 0.8 is reached from every start
        gym.register("IdleRoom-v0", entry_point=IdleRoom, reward_threshold=0.8)
    if "SometimesSucceeds-v0" not in gym.registry:
        gym.register("SometimesSucceeds-v0", entry_point=SometimesSucceeds, max_episode_steps=10)
    if "Alternate-v0" not in gym.registry:
        gym.register("Alternate-v0", entry_point=Alternate, max_episode_steps=20)


_register()
