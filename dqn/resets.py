"""When a run that came near its target and then fell back should start learning afresh.

DQN's greedy policy on CartPole-v1 peaks early (often at the solving return) and then falls back to a fraction of
it for 10,000+ train steps: a run whose evaluator missed the peak waits minutes for the next one. A re-initialized
Q-network with a restarted epsilon schedule, trained on the replay the run already holds, peaks again after about
as many train steps as the first peak took (docs/performance.md, "Learning model"). The rule is written in
evaluation terms only, so it holds for any env with a target return:

- the run came near its target: its best evaluation got at least halfway from its first evaluation to the target;
- then it fell back: every evaluation for `patience` train steps scored below halfway from the first to the best;
- not sooner than `2 * patience` train steps after the start or the last reset, and never once the target is met.

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
    last_reset: int = 0
    resets: int = 0

    def fallback_level(self) -> float | None:
        """The return the greedy policy must stay under to count as fallen back; None while the rule is idle."""
        if self.target is None or self.first_return is None or self.best_return is None \
                or self.target <= self.first_return:
            return None
        if self.best_return < self.first_return + 0.5 * (self.target - self.first_return):
            return None  # never came near the target: a slow start, not a fall
        return self.first_return + 0.5 * (self.best_return - self.first_return)

    def observe(self, train_step: int, average_return: float, solved: bool = False) -> bool:
        """Records one evaluation; True when the learner should reset now (the rule then restarts its clock)."""
        if self.patience <= 0 or solved:
            return False
        if self.first_return is None:
            self.first_return = average_return
        self.best_return = average_return if self.best_return is None else max(self.best_return, average_return)
        level = self.fallback_level()
        if level is None or average_return >= level:
            self.low_since = None
            return False
        if self.low_since is None:
            self.low_since = train_step
        if train_step - self.low_since >= self.patience and train_step - self.last_reset >= 2 * self.patience:
            self.last_reset, self.low_since = train_step, None
            self.resets += 1
            return True
        return False
