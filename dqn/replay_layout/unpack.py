"""The learner side of the layout: a sampled batch back into [batch, steps, ...] rows for `agent.train`.

Block items [k, L, E, ...] become k * E rows (`unblock`); one TD error per item goes back as its priority
(`item_td_errors`); n-step windows that reach past an episode's end are closed (`close_episode_ends`).

Why n-step windows run past episode ends: TF-Agents' observer makes an item only from n + 1 steps of one
episode, so the last n - 1 states of every episode never start an item, yet earlier items bootstrap from them:
their Q-values are never trained, nothing pulls them back towards a target, and the values bootstrapped from
them can grow without bound.
Our actors therefore write every window of n + 1 steps that *starts* inside an episode (never on its
boundary step LAST -> FIRST), and may run into the next episode. Before training, `close_episode_ends`
rewrites each window from its first boundary step on, so the n-step target stops exactly at the episode end.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from dqn.replay_layout.items import ItemShape


def finish_batch(shape: ItemShape, gamma: float):
    """A graph function (experience, info) -> (experience, info) of [batch, L, ...] rows for `agent.train`."""
    def finish(experience, info):
        if shape.actors_send_priorities:
            # The actor's initial priority already did its work on the server; the agent's specs have no policy_info.
            experience = experience._replace(policy_info=())
        if shape.envs_per_item > 1:
            experience = tf.nest.map_structure(unblock, experience)
        if shape.run_past_episode_end:
            experience = close_episode_ends(experience, gamma)
        return experience, info

    return finish


def unblock(leaf: tf.Tensor) -> tf.Tensor:
    """Block items [k, L, E, ...] -> [k * E, L, ...]: env e of item i becomes row i * E + e."""
    moved = tf.transpose(leaf, [0, 2, 1, *range(3, leaf.shape.rank)])
    return tf.reshape(moved, [-1, *moved.shape[2:]])


def item_td_errors(td_errors: np.ndarray, envs_per_item: int) -> np.ndarray:
    """One TD error per sampled item: a block item's is its largest |TD error| (rows i * E ... i * E + E - 1)."""
    if envs_per_item == 1:
        return td_errors
    return np.abs(td_errors).reshape(-1, envs_per_item).max(axis=1)


def close_episode_ends(experience: trajectory.Trajectory, gamma: float) -> trajectory.Trajectory:
    """Windows [B, n + 1, ...] with every step after the first boundary replaced by that boundary step.

    From the boundary step on, rewards become 0 and discounts 1 / gamma. TF-Agents' n-step target is
    r_0 + g d_0 r_1 + ... + g^n (d_0 ... d_{n-1}) Q(s_n); with these values it equals, for an episode that
    ends m < n steps into the window, the m-step target: 0 after a termination (some d is 0 before the
    boundary), and g^m Q(s_T) from the episode's last observation s_T after a truncation. Windows without
    a boundary step in their first n steps are returned unchanged.
    """
    is_boundary = tf.equal(experience.step_type, ts.StepType.LAST)  # [B, L]
    from_boundary = tf.cumsum(tf.cast(is_boundary, tf.int32), axis=1) > 0  # the first boundary and after
    first_boundary = tf.argmax(tf.cast(is_boundary, tf.int32), axis=1, output_type=tf.int32)  # 0 when none

    def tile(leaf: tf.Tensor) -> tf.Tensor:
        boundary_step = tf.gather(leaf, first_boundary, axis=1, batch_dims=1)  # [B, ...]
        mask = from_boundary
        for _ in range(leaf.shape.rank - 2):  # broadcast over the leaf's own dimensions (e.g. observation)
            mask = tf.expand_dims(mask, -1)
        return tf.where(mask, tf.expand_dims(boundary_step, 1), leaf)

    tiled = tf.nest.map_structure(tile, experience)
    undo_gamma = 1.0 / gamma if gamma > 0 else 0.0  # gamma 0: every target is r_0 alone, and 0 * inf would be NaN
    return tiled._replace(
        reward=tf.where(from_boundary, tf.zeros_like(tiled.reward), tiled.reward),
        discount=tf.where(from_boundary, tf.cast(undo_gamma, tiled.discount.dtype), tiled.discount))
