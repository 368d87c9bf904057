"""Partially observed CartPole, brought the way a user brings their own env: `--env-id bench.pomdp_envs:<id>`.

gymnasium imports the module named before the colon in every process that makes the env (each role of
`dqn-service local` included), and importing it registers the ids below. The repository root must be on the
Python path (it is when the service runs from a checkout; otherwise set PYTHONPATH).

`CartPoleNoVelocity-v0`: CartPole-v1 observing only the cart position and the pole angle. The velocities are
what a feed-forward Q-network cannot infer from one observation; a recurrent one can, from consecutive steps.
Same dynamics, 500-step limit and reward threshold (475) as CartPole-v1, so "solved" means the same on both.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

#: CartPole's observation is (cart position, cart velocity, pole angle, pole angular velocity).
POSITION_FEATURES = (0, 2)


class KeepFeatures(gym.ObservationWrapper):
    """Keeps the given features of a 1-D Box observation (and of its bounds)."""

    def __init__(self, env: gym.Env, features: tuple[int, ...]):
        super().__init__(env)
        self._features = np.asarray(features)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[self._features], space.high[self._features],
                                                dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The kept features, in their original order."""
        return np.asarray(observation)[self._features]


def cart_pole_no_velocity(**kwargs) -> gym.Env:
    """CartPole-v1's dynamics (no time limit: registration adds it) observing position and angle only."""
    return KeepFeatures(gym.make("CartPole-v1", max_episode_steps=None, **kwargs).unwrapped, POSITION_FEATURES)


if "CartPoleNoVelocity-v0" not in gym.registry:
    gym.register("CartPoleNoVelocity-v0", entry_point=cart_pole_no_velocity, max_episode_steps=500,
                 reward_threshold=475.0)
