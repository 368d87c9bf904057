"""gymnasium spaces -> TF-Agents specs, and which spaces DQN accepts.

Observations: `Box` of any numeric or bool dtype and rank 0-3, `Discrete`, `MultiDiscrete`, `MultiBinary`, and
`Dict`/`Tuple` nests of them. Each part keeps a compact dtype of its own, so replay stores it as the env made it:
float Boxes and uint8/int32/int64 Boxes keep theirs; a bool Box and MultiBinary become uint8 (TF-Agents' bounded
specs have no bool bounds; both are one byte); other integer Boxes become int32 (int64 for uint32), the nearest
dtypes TF-Agents can sample specs of; Discrete and MultiDiscrete become int64 indices. The network converts each
part (dqn/model/encoders.py). Actions: what the service acts on after dqn/envs/action_spaces.py laid out the env's
own (a `Discrete`, or a `MultiDiscrete` of 0-based indices for a branching Q-network).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf
from tf_agents.specs import array_spec

from dqn.errors import BadInput

#: Observation spaces other than these (and Dict/Tuple nests of them) are refused at start.
SUPPORTED_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
#: Integer dtypes TF-Agents cannot sample a spec of (its agents do at construction) -> the dtype stored instead.
WIDENED_DTYPES = {np.dtype(np.int8): np.int32, np.dtype(np.int16): np.int32, np.dtype(np.uint16): np.int32,
                  np.dtype(np.uint32): np.int64}
#: Highest Box rank: features (0-1), a single-channel image (2), an image with channels (3).
MAX_BOX_RANK = 3


class EnvError(BadInput, ValueError):
    """An environment that cannot be used with DQN; the message says why and what to use."""


def check_spaces(env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
    """The service's action space (dqn/envs/action_spaces.py) and an observation space `observation_spec` accepts."""
    if not isinstance(action_space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
        raise EnvError(f"env {env_id!r} has action space {action_space}; DQN needs Discrete, MultiDiscrete or a "
                       "Tuple of Discrete actions (for continuous control use an actor-critic algorithm, or "
                       "discretize the actions)")
    try:
        observation_spec(observation_space)
    except EnvError as error:
        raise EnvError(f"env {env_id!r}: {error}") from None


def observation_spec(space: gym.Space):
    """TF-Agents spec (a nest for Dict/Tuple spaces) of an observation space; EnvError for unsupported parts."""
    return _spec(space, "observation")


def _spec(space: gym.Space, name: str):
    if isinstance(space, gym.spaces.Dict):
        return {key: _spec(part, f"{name}/{key}") for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_spec(part, f"{name}/{index}") for index, part in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return array_spec.BoundedArraySpec((), np.int64, minimum=start, maximum=start + int(space.n) - 1, name=name)
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = np.asarray(space.start, np.int64)
        return array_spec.BoundedArraySpec(space.shape, np.int64, minimum=start,
                                           maximum=start + np.asarray(space.nvec, np.int64) - 1, name=name)
    if isinstance(space, gym.spaces.MultiBinary):
        return array_spec.BoundedArraySpec(space.shape, np.uint8, minimum=0, maximum=1, name=name)
    if isinstance(space, gym.spaces.Box):
        return _box_spec(space, name)
    raise EnvError(f"observation space {space} ({type(space).__name__}) is not supported: map it to Box, Discrete, "
                   "MultiDiscrete or MultiBinary parts (or a Dict/Tuple of them) with a gymnasium ObservationWrapper")


def _box_spec(space: gym.spaces.Box, name: str) -> array_spec.BoundedArraySpec:
    if len(space.shape) > MAX_BOX_RANK:
        raise EnvError(f"observation Box {name!r} has rank {len(space.shape)} (shape {space.shape}); at most "
                       f"{MAX_BOX_RANK} (height, width, channels) is supported: reshape it with an ObservationWrapper")
    if space.dtype == np.bool_:
        return array_spec.BoundedArraySpec(space.shape, np.uint8, minimum=0, maximum=1, name=name)
    if not np.issubdtype(space.dtype, np.number):
        raise EnvError(f"observation Box {name!r} has dtype {space.dtype}; a numeric or bool dtype is required")
    dtype = WIDENED_DTYPES.get(np.dtype(space.dtype), space.dtype)
    low, high = space.low, space.high
    if len(space.shape) >= 2 and (low == low.flat[0]).all() and (high == high.flat[0]).all():
        low, high = low.flat[0], high.flat[0]  # images: scalar bounds, not 2 x 28k numbers in every table signature
    return array_spec.BoundedArraySpec(space.shape, dtype, minimum=low, maximum=high, name=name)


def is_image(spec) -> bool:
    """Rank 2 (height, width) or 3 (height, width, channels) parts are images."""
    return len(spec.shape) in (2, 3)


def is_nested(spec) -> bool:
    """True for a Dict/Tuple observation spec (several parts)."""
    return tf.nest.is_nested(spec)


def observation_converter(spec):
    """A function that casts a (batched) gymnasium observation to the spec's dtypes (bool -> uint8 and the like).

    A single array spec gets a plain `np.asarray` (the common case costs no nest traversal per step).
    """
    if not is_nested(spec):
        dtype = spec.dtype
        return lambda observation: np.asarray(observation, dtype=dtype)
    return lambda observation: tf.nest.map_structure(lambda part, leaf: np.asarray(part, dtype=leaf.dtype),
                                                     observation, spec)


def action_spec(space: gym.spaces.Discrete | gym.spaces.MultiDiscrete) -> array_spec.BoundedArraySpec:
    """TF-Agents spec of the service's action space: int64 scalar in [start, start + n - 1], or int64 [D] from 0."""
    if isinstance(space, gym.spaces.MultiDiscrete):
        return array_spec.BoundedArraySpec(space.shape, np.int64, minimum=0,
                                           maximum=np.asarray(space.nvec, np.int64) - 1, name="action")
    start = int(space.start)
    return array_spec.BoundedArraySpec((), np.int64, minimum=start, maximum=start + int(space.n) - 1,
                                       name="action")
