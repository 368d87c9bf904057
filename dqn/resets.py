"""When a run that came near its target and then fell back should start learning afresh.

DQN's greedy policy on CartPole-v1 peaks early (often at the solving return) and then falls back to a fraction of
it for 10,000+ train steps: a run whose evaluator missed the peak waits minutes for the next one. A re-initialized
Q-network with a restarted epsilon schedule, trained on the replay the run already holds, peaks again after about
as many train steps as the first peak took (docs/performance.md, "Learning model"). The rule is written in
evaluation terms only, so it holds for any env with a target return:

- the current attempt (the run since its start or its last reset) came near the target: one of its evaluations
  got at least halfway from the run's first evaluation to the target;
- then it fell back: every evaluation for `patience` train steps scored below halfway from the first evaluation
  to the run's best;
- never once the target is met. After a reset the next attempt must come near again before it can be reset, so
  an env whose attempts take long to come near (Acrobot-v1's noisy early evaluations) is not reset over and over.

A run without a target (no target_return, no reward_threshold) is never reset: "near" has no meaning there.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class FallbackResetRule:
    """Feeds on (train step, greedy average) pairs; says when the learner should start its Q-network afresh."""

    patience: int
    target: float | None
    first_return: float | None = None
    best_return: float | None = None
    low_since: int | None = None  # first train step of the current run of evaluations below the fallback level
    armed: bool = False  # the current attempt came near the target
    resets: int = 0

    def near_level(self) -> float | None:
        """The return an attempt must reach to count as near the target (None without a target)."""
        if self.target is None or self.first_return is None or self.target <= self.first_return:
            return None
        return self.first_return + 0.5 * (self.target - self.first_return)

    def fallback_level(self) -> float | None:
        """The return the greedy policy must stay under to count as fallen back (None before the first evaluation)."""
        if self.first_return is None or self.best_return is None:
            return None
        return self.first_return + 0.5 * (self.best_return - self.first_return)

    def observe(self, train_step: int, average_return: float, solved: bool = False) -> bool:
        """Records one evaluation; True when the learner should reset now (the next attempt starts unarmed)."""
        if self.patience <= 0 or solved:
            return False
        if self.first_return is None:
            self.first_return = average_return
        self.best_return = average_return if self.best_return is None else max(self.best_return, average_return)
        near = self.near_level()
        if near is None:
            return False
        self.armed = self.armed or average_return >= near
        if not self.armed or average_return >= self.fallback_level():
            self.low_since = None
            return False
        if self.low_since is None:
            self.low_since = train_step
        if train_step - self.low_since < self.patience:
            return False
        self.armed, self.low_since = False, None
        self.resets += 1
        return True
