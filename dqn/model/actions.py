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
DqnAgent's `observation_and_action_constraint_splitter`, not through this module.
"""

from __future__ import annotations

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
    """Q-values [N, A] at each row's action [N] (indices)."""
    return q_values[np.arange(len(actions)), actions]


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
    mask = tf.convert_to_tensor(mask, tf.bool)
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
