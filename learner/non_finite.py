"""Non-finite updates: skipped and counted; weights that turned non-finite are never published, saved or exported.

TF-Agents' `DqnAgent.train` checks its loss (`check_numerics`) and raises on a NaN or infinite one: the learner
skips that update and counts it. Inside the graph call the check is not ordered before the optimizer's update,
and a finite loss can still have non-finite gradients (an overflow), so non-finite values may reach the weights:
after a non-finite loss, and before every publication, checkpoint and export, the learner checks that all of the
agent's variables (networks and optimizer) are finite. Non-finite variables, or a run of `MAX_IN_A_ROW`
non-finite losses, roll the learner back to its last good checkpoint (a fresh Q-network where there is none),
said in one log line.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from dqn.model.graph_io import HostOutput

#: Non-finite updates in a row after which the learner rolls back to its last good checkpoint.
MAX_IN_A_ROW = 10
#: What `DqnAgent.train` raises with when its loss is NaN or infinite.
NON_FINITE_LOSS = "Loss is inf or nan"


def is_non_finite_loss(error: Exception) -> bool:
    """True for the error `DqnAgent.train` raises on a NaN or infinite loss."""
    return isinstance(error, tf.errors.InvalidArgumentError) and NON_FINITE_LOSS in str(error)


class FiniteVariables:
    """`all_finite()`: whether every float variable is finite, in one graph call that returns no tensor.

    `variables()` is asked on every check: an optimizer makes its slot variables at its first update.
    """

    def __init__(self, variables: Callable[[], list[tf.Variable]]):
        self._variables = variables
        self._result = HostOutput((), tf.bool)
        self._checked: list[tf.Variable] = []
        self._check = None

    def _make_check(self, floats: list[tf.Variable]):
        @tf.function(autograph=False)
        def check():
            self._result.write(tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in floats])))

        return check

    def all_finite(self) -> bool:
        """True when no variable holds a NaN or an infinity."""
        floats = [variable for variable in self._variables() if variable.dtype.is_floating]
        if self._check is None or len(floats) != len(self._checked):
            self._checked, self._check = floats, self._make_check(floats)
        self._check()
        return bool(self._result.value)


class NonFiniteUpdates:
    """Counts skipped updates and roll-backs; `skipped()` says when a run of them calls for a roll-back."""

    def __init__(self, max_in_a_row: int = MAX_IN_A_ROW):
        self.max_in_a_row = max_in_a_row
        self.skipped_total = 0
        self.rollbacks = 0
        self._in_a_row = 0

    def skipped(self) -> bool:
        """One more update skipped; True when `max_in_a_row` came in a row (the caller then rolls back)."""
        self.skipped_total += 1
        self._in_a_row += 1
        return self._in_a_row >= self.max_in_a_row

    def applied(self) -> None:
        """An update went through: the run of skipped ones is over."""
        self._in_a_row = 0

    def rolled_back(self) -> None:
        """Counts a roll-back and starts the run afresh."""
        self.rollbacks += 1
        self._in_a_row = 0
