"""Sampled replay items the learner must not train on, found in-graph so a good batch costs a few reductions.

Reverb's server stores whatever a client sends: only Reverb's own writers check an item against the table
signature. An item can therefore reach the learner holding values no actor writes: an action outside the action
spec makes the train step's gather raise on a CPU, a crash at every restart while the item stays in the table.
`item_problems` names every such item of a batch by its position, so the learner can skip the batch and delete
those keys (learner/bad_batches.py). Items of other shapes or dtypes never get this far: Reverb's sampler checks
them against the table signature and fails that batch (learner/staged_batches.py goes on with the next).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

#: Problem bits of `item_problems`, and what each means in a log line.
BAD_ACTION, BAD_STEP_TYPE, BAD_DISCOUNT = 1, 2, 4
PROBLEMS = {BAD_ACTION: "action outside the action spec", BAD_STEP_TYPE: "step type not FIRST, MID or LAST",
            BAD_DISCOUNT: "discount NaN or outside [0, 1]"}


def item_problems(experience, action_spec) -> tf.Tensor:
    """In-graph: one int32 per item of a sampled batch [items, steps, ...], 0 if it is fit to train on, else bits.

    Checked: actions within the action spec, step types FIRST/MID/LAST, discounts in [0, 1] (NaN included).
    Observations and rewards are not checked here: non-finite ones give a non-finite loss, which the learner skips
    and rolls back from (learner/non_finite.py).
    """
    def per_item(bad: tf.Tensor) -> tf.Tensor:
        return tf.reduce_any(tf.reshape(bad, [bad.shape[0], -1]), axis=1)

    def bad_type(step_type: tf.Tensor) -> tf.Tensor:
        return (step_type < ts.StepType.FIRST) | (step_type > ts.StepType.LAST)

    action = experience.action
    low = tf.constant(np.min(action_spec.minimum), action.dtype)
    high = tf.constant(np.max(action_spec.maximum), action.dtype)
    discount = experience.discount
    problems = [(per_item((action < low) | (action > high)), BAD_ACTION),
                (per_item(bad_type(experience.step_type)) | per_item(bad_type(experience.next_step_type)),
                 BAD_STEP_TYPE),
                (per_item(~((discount >= 0) & (discount <= 1))), BAD_DISCOUNT)]
    return tf.add_n([tf.where(bad, bit, 0) for bad, bit in problems])


def describe(codes: np.ndarray) -> str:
    """'2 items: action outside the action spec (2)' for the problem codes of one batch."""
    bad = codes[codes != 0]
    found = [f"{text} ({int(np.count_nonzero(bad & bit))})" for bit, text in PROBLEMS.items() if (bad & bit).any()]
    return f"{bad.size} item{'s' if bad.size != 1 else ''}: " + ", ".join(found)
