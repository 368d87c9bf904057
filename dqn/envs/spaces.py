"""gymnasium spaces -> TF-Agents specs, and the check that an env's spaces suit DQN."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from tf_agents.specs import array_spec

from dqn.errors import BadInput


class EnvError(BadInput, ValueError):
    """An environment that cannot be used with DQN; the message says why and what to use."""


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
