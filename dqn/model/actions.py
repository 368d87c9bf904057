"""Action choice from Q-values in one place: the greedy action, max-Q, the Q of a taken action, random actions.

Every rule of ours that picks or scores an action from Q-values calls these, in numpy (the numpy mirror and the
evaluator's loop, the warm-up and held random actions, the actor's initial priorities) or in TF (the learner's batch
summary, advantage learning's targets), so a new rule, such as a mask of valid actions, changes this module only.

A mask is bool [..., num_actions], True where the action is valid; None means every action is valid, and then each
function runs exactly the numpy or TF call its callers made before it existed (same ops, same draws from the
generator), so seeded runs do not change. Masked-out actions are never the argmax, never counted in the max and never
drawn; random actions are uniform over the valid ones. Actions here are indices 0..num_actions - 1 into the
Q-values (an action spec with another minimum adds it).

A row with no valid action is a broken env promise. The numpy flavour raises ValueError: its callers act for envs and
can report the fault. Graph code cannot raise without stopping a train step over one bad row, so the TF flavour
treats such a row as all valid: the unmasked argmax, max and uniform draw.

Where TF-Agents picks the action itself (QPolicy and GreedyPolicy behind the graph collect and evaluation policies,
EpsilonGreedyPolicy's random actions, DqnAgent's target max) we only configure it: a mask enters there through
DqnAgent's `observation_and_action_constraint_splitter`, which `ValidActions.splitter` gives.

`ValidActions` says where a run's mask sits in its observation (dqn/envs/action_masks.py puts it there) and what
the Q-network reads of that observation: the other parts only, unless `action_mask_input` asks for the mask too.
Actions of a branching Q-network (dqn/model/branching.py) are vectors of D indices chosen from Q-values [..., D,
n_max]; the functions here then work per dimension, and the mask [..., D, n_max] also rules out the values a
narrower dimension lacks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf


def check_mask(mask: np.ndarray) -> np.ndarray:
    """`mask` as given, after checking it is bool and allows some action in every row; else TypeError / ValueError."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"a mask of valid actions must be bool, got {mask.dtype}")
    empty = ~mask.any(axis=-1)
    if empty.any():
        rows = np.argwhere(np.atleast_1d(empty))[:5].tolist()
        raise ValueError(f"a mask of valid actions allows no action in {int(empty.sum())} row(s), first {rows}")
    return mask


def greedy_actions(q_values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Per row of Q-values [..., A], the index of the first highest one among the valid actions."""
    if mask is None:
        return q_values.argmax(axis=-1)
    valid = np.broadcast_to(check_mask(mask), q_values.shape)
    best = np.where(valid, q_values, -np.inf).argmax(axis=-1)
    # Where every valid Q-value is -inf the argmax may stop on a masked one: take the first valid action instead.
    chosen_valid = np.take_along_axis(valid, best[..., None], axis=-1)[..., 0]
    return np.where(chosen_valid, best, valid.argmax(axis=-1))


def max_q_values(q_values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Per row of Q-values [..., A], the highest Q-value among the valid actions."""
    if mask is None:
        return q_values.max(axis=-1)
    return np.where(check_mask(mask), q_values, -np.inf).max(axis=-1)


def taken_q_values(q_values: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Q-values [N, A] at each row's action [N] (indices); [N, D, A] at [N, D] per dimension."""
    actions = np.asarray(actions)
    if actions.ndim == 1:
        return q_values[np.arange(len(actions)), actions]
    return np.take_along_axis(q_values, actions[..., None], axis=-1)[..., 0]


def random_actions(rng: np.random.Generator, size, num_actions: int, mask: np.ndarray | None = None,
                   minimum: int = 0, dtype=np.int64) -> np.ndarray:
    """`size` uniform actions in [minimum, minimum + num_actions); with a mask [*size, A], uniform over the valid ones.

    Unmasked it is one `rng.integers` call over the range, so a seeded generator gives the actions it always gave.
    """
    if mask is None:
        return rng.integers(minimum, minimum + num_actions, size=size, dtype=dtype)
    valid = np.broadcast_to(check_mask(mask), (*np.reshape(size, -1), num_actions))
    picks = rng.integers(0, valid.sum(axis=-1), dtype=dtype)  # the how-manieth valid action, per row
    return ((valid.cumsum(axis=-1) <= picks[..., None]).sum(axis=-1) + minimum).astype(dtype)


def _valid_tf(mask) -> tf.Tensor:
    """The mask with every row that allows nothing opened to all actions (see the module docstring)."""
    mask = tf.cast(mask, tf.bool)  # a stored mask is uint8
    return tf.logical_or(mask, tf.logical_not(tf.reduce_any(mask, axis=-1, keepdims=True)))


def greedy_actions_tf(q_values: tf.Tensor, mask=None, output_type=tf.int32) -> tf.Tensor:
    """Per row of Q-values [..., A], the index of a highest one among the valid actions (the first one on CPU)."""
    if mask is None:
        return tf.argmax(q_values, axis=-1, output_type=output_type)
    valid = _valid_tf(mask)
    best = tf.argmax(tf.where(valid, q_values, tf.constant(-np.inf, q_values.dtype)), axis=-1,
                     output_type=output_type)
    # As in numpy: where every valid Q-value is -inf, take a valid action instead of a masked one.
    one_hot = tf.equal(tf.range(tf.shape(q_values)[-1], dtype=output_type), best[..., None])
    chosen_valid = tf.reduce_any(tf.logical_and(one_hot, valid), axis=-1)
    first_valid = tf.argmax(tf.cast(valid, tf.int32), axis=-1, output_type=output_type)
    return tf.where(chosen_valid, best, first_valid)


def max_q_values_tf(q_values: tf.Tensor, mask=None) -> tf.Tensor:
    """Per row of Q-values [..., A], the highest Q-value among the valid actions."""
    if mask is None:
        return tf.reduce_max(q_values, axis=-1)
    return tf.reduce_max(tf.where(_valid_tf(mask), q_values, tf.constant(-np.inf, q_values.dtype)), axis=-1)


def taken_q_values_tf(q_values: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """Q-values [..., A] at each row's action [...] (indices)."""
    return tf.gather(q_values, tf.cast(actions, tf.int32), axis=-1, batch_dims=actions.shape.rank)


def random_actions_tf(generator: tf.random.Generator, shape, num_actions: int, mask=None, minimum: int = 0,
                      dtype=tf.int64) -> tf.Tensor:
    """Uniform actions of `shape` in [minimum, minimum + num_actions); with a mask [*shape, A], over the valid ones."""
    if mask is None:
        return generator.uniform(shape, minval=minimum, maxval=minimum + num_actions, dtype=dtype)
    valid = tf.broadcast_to(_valid_tf(mask), tf.concat([tf.reshape(shape, [-1]), [num_actions]], axis=0))
    counts = tf.reduce_sum(tf.cast(valid, tf.int32), axis=-1)
    # floor(u * count) is below count but for float rounding, which the minimum catches.
    picks = tf.minimum(tf.cast(generator.uniform(tf.shape(counts)) * tf.cast(counts, tf.float32), tf.int32),
                       counts - 1)
    before = tf.cast(tf.cumsum(tf.cast(valid, tf.int32), axis=-1) <= picks[..., None], tf.int32)
    return tf.cast(tf.reduce_sum(before, axis=-1) + minimum, dtype)


@dataclasses.dataclass(frozen=True)
class ValidActions:
    """A run's actions and where its mask of valid actions sits: built once from the settings and the specs.

    `mask_key` names the observation's mask part (None: no mask); the Q-network reads the parts `network_keys`
    (one is read alone), or the whole observation where that is None. `padding` (branching only) marks the values
    each dimension has. Actions are `minimum` + indices into the Q-values, shaped `action_shape` per observation.
    """

    q_shape: tuple[int, ...]
    action_shape: tuple[int, ...] = ()
    minimum: int = 0
    mask_key: str | None = None
    network_keys: tuple[str, ...] | None = None
    padding: np.ndarray | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def of(cls, observation_spec, action_spec, mask_key: str | None = None, mask_input: bool = False):
        """From the specs; `mask_key` is the resolved setting's key (None for action_mask none)."""
        if tuple(action_spec.shape):  # a branching layout: one index per dimension
            nvec = np.asarray(action_spec.maximum, np.int64).reshape(-1) + 1
            width = int(nvec.max())
            padding = np.arange(width)[None, :] < nvec[:, None]
            kwargs = {"q_shape": (len(nvec), width), "action_shape": (len(nvec),),
                      "padding": None if padding.all() else padding}
        else:
            minimum = int(action_spec.minimum)
            kwargs = {"q_shape": (int(action_spec.maximum) - minimum + 1,), "minimum": minimum}
        if mask_key is None or not isinstance(observation_spec, dict) or mask_key not in observation_spec:
            return cls(**kwargs)
        rest = None if mask_input else tuple(key for key in sorted(observation_spec) if key != mask_key)
        return cls(**kwargs, mask_key=mask_key, network_keys=rest)

    @property
    def masked(self) -> bool:
        """True where the observation holds a mask of valid actions."""
        return self.mask_key is not None

    @property
    def num_actions(self) -> int:
        """Values of one action (of one dimension, for a branching layout)."""
        return self.q_shape[-1]

    def network_observation(self, observation):
        """What the Q-network reads of an observation (numpy, tensors or specs alike)."""
        if self.network_keys is None:
            return observation
        if len(self.network_keys) == 1:
            return observation[self.network_keys[0]]
        return {key: observation[key] for key in self.network_keys}

    def splitter(self):
        """DqnAgent's `observation_and_action_constraint_splitter` (None without a mask): (network input, mask)."""
        if not self.masked:
            return None
        return lambda observation: (self.network_observation(observation), observation[self.mask_key])

    def mask(self, observation) -> np.ndarray | None:
        """Bool [N, *q_shape] of a batch of observations: the env's mask and the padding; None if every one is valid."""
        if self.masked:
            mask = np.asarray(observation[self.mask_key]).reshape(-1, *self.q_shape) != 0
            return mask if self.padding is None else mask & self.padding
        if self.padding is None:
            return None
        return np.broadcast_to(self.padding, (len(tf.nest.flatten(observation)[0]), *self.q_shape))

    def mask_tf(self, observation) -> tf.Tensor | None:
        """`mask` in TF, from a batch of observation tensors."""
        mask = None
        if self.masked:
            mask = tf.reshape(tf.cast(observation[self.mask_key], tf.bool), [-1, *self.q_shape])
        if self.padding is not None:
            mask = tf.constant(self.padding) if mask is None else tf.logical_and(mask, self.padding)
        return mask

    def greedy(self, q_values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Greedy actions (with the minimum) from Q-values [N, *q_shape]."""
        actions = greedy_actions(q_values, mask)
        return actions + self.minimum if self.minimum else actions

    def random(self, rng: np.random.Generator, count: int, mask: np.ndarray | None) -> np.ndarray:
        """`count` uniform valid actions; `mask` [count, *q_shape] or None."""
        size = (count, *self.action_shape) if self.action_shape else count
        return random_actions(rng, size, self.num_actions, mask, self.minimum)

    def illegal(self, actions: np.ndarray, mask: np.ndarray | None) -> int:
        """How many of a batch of actions the mask [N, *q_shape] forbids (any of a branching action's values)."""
        if mask is None:
            return 0
        indices = np.asarray(actions, np.int64) - self.minimum
        allowed = np.take_along_axis(mask, indices.reshape(*indices.shape, 1), axis=-1)[..., 0]
        return int((~allowed.reshape(len(indices), -1).all(axis=1)).sum())
