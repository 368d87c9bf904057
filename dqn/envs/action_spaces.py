"""The env's actions as the service acts: one Discrete as it is, several discrete dimensions flat or branched.

A `Discrete` action space is used as it is. `MultiDiscrete` and a `Tuple` of `Discrete` (several knobs, a joystick
with a button) have D dimensions of n_d values each; the service acts in one of two layouts, chosen from the size:

- flat: one action per combination, product P = n_1 x ... x n_D, numbered row-major (the last dimension fastest)
  as `np.ravel_multi_index` does. One Q-value per combination learns how the dimensions interact; its output
  layer grows with P, so it is chosen while P <= `max_flat_actions`.
- branching: D heads of n_max = max n_d values (Tavakoli et al. 2018, dqn/model/branching.py); the action is the
  vector of D indices. Its output layer grows with D x n_max only; chosen while that is <= `max_branch_outputs`.

A space too large for both is refused at start (`EnvError`, one line naming the size and the fix). Service actions
count from 0 in every dimension; the env's own start values and form (array or tuple) are put back by
`ServiceActions`, a gymnasium wrapper, and by `ActionForm.env_actions_tf` in an exported policy.

A mask of valid actions (where the env gives one: dqn/envs/action_masks.py) is kept in the service's layout, as
one flat uint8 vector: n values for a Discrete, P for flat, D x n_max for branching (padding 0). An env may give it
per dimension (sum of n_d values, or one array per dimension: MaskablePPO's convention; a combination is valid when
each of its values is) or, for the flat layout, over the P combinations.
"""

from __future__ import annotations

import dataclasses
import functools

import gymnasium as gym
import numpy as np
import tensorflow as tf

from dqn.envs.spaces import EnvError
from dqn.settings.common import MAX_BRANCH_OUTPUTS, MAX_FLAT_ACTIONS


@dataclasses.dataclass(frozen=True)
class ActionForm:
    """The env's action space (`kind`, values and start per dimension) and the service's layout of it."""

    kind: str  # "discrete", "multi-discrete" or "tuple"
    nvec: tuple[int, ...]  # values per dimension (one for a Discrete)
    start: tuple[int, ...]  # the env's first value per dimension
    shape: tuple[int, ...]  # a MultiDiscrete's own shape (its nvec's); () otherwise
    layout: str  # "single" (a Discrete as it is), "flat" or "branching"

    @classmethod
    def of(cls, space: gym.Space, max_flat: int = MAX_FLAT_ACTIONS, max_branch: int = MAX_BRANCH_OUTPUTS
           ) -> ActionForm:
        """The form of an action space; EnvError for an unsupported space or one too large for both layouts."""
        if isinstance(space, gym.spaces.Discrete):
            return cls("discrete", (int(space.n),), (int(space.start),), (), "single")
        if isinstance(space, gym.spaces.MultiDiscrete):
            kind, nvec, start, shape = ("multi-discrete", np.asarray(space.nvec).ravel(),
                                        np.asarray(space.start).ravel(), tuple(space.nvec.shape))
        elif isinstance(space, gym.spaces.Tuple) and space.spaces and all(
                isinstance(part, gym.spaces.Discrete) for part in space.spaces):
            kind, shape = "tuple", ()
            nvec = np.array([part.n for part in space.spaces])
            start = np.array([part.start for part in space.spaces])
        else:
            raise EnvError(f"action space {space}: DQN needs Discrete, MultiDiscrete or a Tuple "
                           "of Discrete actions (for continuous control use an actor-critic algorithm, or "
                           "discretize the actions)")
        nvec, start = tuple(int(n) for n in nvec), tuple(int(s) for s in start)
        size, outputs = int(np.prod(nvec, dtype=np.float64)), len(nvec) * max(nvec)
        if size <= max_flat:
            return cls(kind, nvec, start, shape, "flat")
        if outputs <= max_branch:
            return cls(kind, nvec, start, shape, "branching")
        raise EnvError(f"action space {type(space).__name__} of {len(nvec)} dimensions of up to {max(nvec)} values is "
                       f"too large: {size:.3g} combinations (flat up to --max-flat-actions {max_flat}), "
                       f"{len(nvec)} x {max(nvec)} = {outputs} outputs of a branching Q-network (up to "
                       f"--max-branch-outputs {max_branch}); discretize coarser or act on fewer dimensions, or raise "
                       "--max-branch-outputs")

    @property
    def dims(self) -> int:
        """D, the number of dimensions."""
        return len(self.nvec)

    @property
    def width(self) -> int:
        """n_max, the most values of a dimension (the branching heads' width)."""
        return max(self.nvec)

    @functools.cached_property
    def size(self) -> int:
        """P, the number of combinations."""
        return int(np.prod(self.nvec))

    @property
    def q_shape(self) -> tuple[int, ...]:
        """Q-values per observation: (n,) for a Discrete, (P,) flat, (D, n_max) branching."""
        return (self.dims, self.width) if self.layout == "branching" else (self.size,)

    @functools.cached_property
    def mask_length(self) -> int:
        """Values of a mask in the service's layout (flat uint8 vector)."""
        return int(np.prod(self.q_shape))

    @functools.cached_property
    def _per_dim_size(self) -> int:
        return sum(self.nvec)

    def padding(self) -> np.ndarray | None:
        """Branching: bool (D, n_max), True where a dimension has that value; None for other layouts."""
        if self.layout != "branching":
            return None
        return np.arange(self.width)[None, :] < np.asarray(self.nvec)[:, None]

    def service_space(self, space: gym.Space) -> gym.Space:
        """The action space the service acts in (the env's own for a Discrete)."""
        if self.layout == "single":
            return space
        if self.layout == "flat":
            return gym.spaces.Discrete(self.size)
        return gym.spaces.MultiDiscrete(np.asarray(self.nvec, np.int64))

    def env_action(self, action):
        """One service action -> the env's action (its start values, array shape or tuple)."""
        values = np.unravel_index(int(action), self.nvec) if self.layout == "flat" else action
        values = np.asarray(values, np.int64) + np.asarray(self.start, np.int64)
        if self.kind == "tuple":
            return tuple(int(value) for value in values)
        return values.reshape(self.shape)

    def service_actions(self, env_actions) -> np.ndarray:
        """A batch of the env's actions [N, ...] (arrays, or a tuple of per-dimension arrays) -> service actions."""
        if self.kind == "tuple":
            values = np.stack([np.asarray(part, np.int64) for part in env_actions], axis=-1)
        else:
            values = np.asarray(env_actions, np.int64).reshape(-1, self.dims)
        values = values - np.asarray(self.start, np.int64)
        if self.layout == "flat":
            return np.ravel_multi_index(tuple(values.T), self.nvec).astype(np.int64)
        return values

    def env_actions_tf(self, actions: tf.Tensor):
        """Service actions [B] or [B, D] -> the env's actions in TF: [B, *shape] int64, or a tuple of [B] tensors."""
        actions = tf.cast(actions, tf.int64)
        if self.layout == "flat":
            strides = np.cumprod((self.nvec[1:] + (1,))[::-1])[::-1].astype(np.int64)
            actions = tf.math.floormod(tf.math.floordiv(actions[:, None], strides), np.asarray(self.nvec, np.int64))
        values = actions + np.asarray(self.start, np.int64)
        if self.kind == "tuple":
            return tuple(values[:, d] for d in range(self.dims))
        return tf.reshape(values, [-1, *self.shape])

    def service_mask(self, mask) -> np.ndarray:
        """An env's mask (see the module docstring) in the service's layout: uint8 [mask_length]; EnvError if misfit."""
        if self.layout == "single" and not isinstance(mask, tuple | list):  # the common case, on every env step
            flat = np.asarray(mask).reshape(-1)
            if flat.size != self.size:
                raise EnvError(self._misfit(flat.size, f"{self.size}"))
            return (flat != 0).view(np.uint8)
        if isinstance(mask, tuple | list):
            flat = np.concatenate([np.asarray(part).ravel() for part in mask]) if mask else np.zeros(0)
            per_dim = True
        else:
            flat = np.asarray(mask).ravel()
            per_dim = self.layout != "single" and flat.size == self._per_dim_size
        valid = flat != 0
        if per_dim and flat.size == self._per_dim_size:
            # One gather from the per-dimension values (a False appended for the padding): every value of a
            # combination (flat) must be valid, or each head's values are laid out (branching).
            gathered = np.append(valid, False)[self._per_dim_positions]
            valid = gathered.all(axis=1) if self.layout == "flat" else gathered
        elif per_dim or flat.size != self.size or self.layout == "branching":
            expected = f"{sum(self.nvec)} (per dimension)"
            if self.layout == "single":
                expected = f"{self.size}"
            elif self.layout == "flat":
                expected += f" or {self.size} (one per combination)"
            raise EnvError(self._misfit(flat.size, expected))
        return valid.view(np.uint8).ravel()

    def allows_some(self, service_mask: np.ndarray) -> bool:
        """Whether a mask in the service's layout leaves an action to take: a value in every dimension (branching)."""
        if self.layout != "branching":
            return bool(service_mask.any())
        return bool(service_mask.reshape(self.q_shape).any(axis=-1).all())

    @functools.cached_property
    def _per_dim_positions(self) -> np.ndarray:
        """Where each Q-value's dimension values sit in a per-dimension mask: flat [P, D], branching [D, n_max].

        Position sum(nvec) is the padding (a False the gather appends).
        """
        offsets = np.cumsum((0, *self.nvec[:-1]))
        if self.layout == "flat":
            values = np.stack(np.unravel_index(np.arange(self.size), self.nvec), axis=-1)
            return offsets + values
        values = np.arange(self.width)[None, :]
        return np.where(values < np.asarray(self.nvec)[:, None], offsets[:, None] + values, sum(self.nvec))

    def _misfit(self, got: int, expected: str) -> str:
        actions = f"the {self.size} actions take" if self.layout == "single" else \
            f"action dimensions {list(self.nvec)} take"
        return f"the mask of valid actions has {got} values, but {actions} {expected}"


class ServiceActions(gym.ActionWrapper):
    """An env acted on in the service's layout: a flat index or a vector of 0-based indices -> the env's action."""

    def __init__(self, env: gym.Env, form: ActionForm):
        super().__init__(env)
        self.form = form
        self.action_space = form.service_space(env.action_space)

    def action(self, action):
        """The env's form of one service action."""
        return self.form.env_action(action)


def service_actions(env: gym.Env, max_flat: int, max_branch: int) -> gym.Env:
    """`env` acting in the service's layout: as it is for a Discrete, else wrapped in `ServiceActions`."""
    form = ActionForm.of(env.action_space, max_flat, max_branch)
    return env if form.layout == "single" else ServiceActions(env, form)
