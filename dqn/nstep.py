"""n-step replay windows that reach past an episode's end, and the learner-side fix that makes them exact.

TF-Agents' observer makes an item only from n + 1 steps of one episode, so the last n - 1 states of every
episode never start an item, yet earlier items bootstrap from them: their Q-values are never trained and,
in CartPole, grew without bound (bench/learning_sim.py: mean Q 2.8e5 after 3,000 steps with n = 3).
Our actors therefore write every window of n + 1 steps that *starts* inside an episode (never on its
boundary step LAST -> FIRST), and may run into the next episode. Before training, `close_episode_ends`
rewrites each window from its first boundary step on, so the n-step target stops exactly at the episode end.
"""

from __future__ import annotations

import tensorflow as tf
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory


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
