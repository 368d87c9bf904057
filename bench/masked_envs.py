"""CartPole with a mask of valid actions that allows both, for measuring what a mask costs and nothing else.

`MaskedCartPole-v0` reports `info["action_mask"]` (gymnasium's convention, all ones) at every reset and step; run it
with `--action-mask info` against `--action-mask none` (the mask left unread): same dynamics, same episodes, so the
difference in throughput is the mask's own work (the adapter's wrapper, the Dict observation, masked choices, the
mask's bytes in replay, the count of illegal actions).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class MaskedCartPole(CartPoleEnv):
    """CartPole-v1 whose info holds an all-ones mask of its 2 actions."""

    _MASK = np.ones(2, np.int8)

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        return observation, {**info, "action_mask": self._MASK}

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, reward, terminated, truncated, {**info, "action_mask": self._MASK}


if "MaskedCartPole-v0" not in gym.registry:
    gym.register("MaskedCartPole-v0", entry_point=MaskedCartPole, max_episode_steps=500, reward_threshold=475.0)
