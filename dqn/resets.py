"""When a run stuck partway to its target should start learning afresh.

DQN's greedy policy on CartPole-v1 often rises, falls back and then stays at about a fifth of the target (the
cart drifts off the track after ~100 steps) for 10,000+ train steps; the same seed's network, trained on, rarely
leaves that level within minutes, while a fresh Q-network with a restarted epsilon schedule, trained on the replay
the run already holds, usually solves within about as many train steps as a fresh run takes (docs/performance.md,
"Learning model"). The rule is written in evaluation terms only, so it holds for any env with a target return. A
run is stuck when, for `patience` train steps and at least `MIN_EVALUATIONS` evaluations in a row, every greedy
average stayed in the band

- above `FLOOR_FRACTION` of the way from the run's lowest evaluation (about random play) to the target: an
  evaluation at the random level is what a still-learning policy of a hard-exploration env (Acrobot-v1,
  MountainCar-v0) scores between its successes, and it says nothing about being stuck, so it ends the streak;
- below halfway from the lowest evaluation to the current attempt's best, and below halfway to the target: the
  policy has fallen back from what it once played, and is not close to solving.

An evaluation outside the band ends the streak. The lowest evaluation rather than the first is the reference
because an untrained network's greedy policy can be lucky (a CartPole-v1 run's first evaluation scored 132, and
its plateau near 90 then lay below a floor measured from there). Never once the target is met; never without a
target. After a reset the next attempt has its own best and must be stuck again, for the full patience, before it
is reset again.
"""

from __future__ import annotations

import dataclasses

#: Evaluations at or below this fraction of the way from the lowest evaluation to the target end a streak.
FLOOR_FRACTION = 0.1
#: A streak needs at least this many evaluations (10 episodes each) however long it lasts in train steps.
MIN_EVALUATIONS = 5


@dataclasses.dataclass
class FallbackResetRule:
    """Feeds on (train step, greedy average) pairs; says when the learner should start its Q-network afresh."""

    patience: int
    target: float | None
    lowest_return: float | None = None  # the run's lowest greedy average: about random play
    attempt_best: float | None = None  # best greedy average since the run's start or its last reset
    stuck_since: int | None = None  # train step of the first evaluation of the current in-band streak
    stuck_evaluations: int = 0
    resets: int = 0
    fired_band: tuple[float, float] | None = None  # the band of the streak that asked for the last reset

    def band(self) -> tuple[float, float] | None:
        """(floor, ceiling) of the stuck band, or None where there is no target or no evaluation yet."""
        if self.target is None or self.lowest_return is None or self.target <= self.lowest_return:
            return None
        span = self.target - self.lowest_return
        best = self.attempt_best if self.attempt_best is not None else self.lowest_return
        ceiling = self.lowest_return + 0.5 * min(span, best - self.lowest_return)
        return self.lowest_return + FLOOR_FRACTION * span, ceiling

    def observe(self, train_step: int, average_return: float, solved: bool = False) -> bool:
        """Records one evaluation; True when the learner should reset now (the next attempt starts afresh)."""
        if self.patience <= 0 or solved:
            return False
        self.lowest_return = average_return if self.lowest_return is None else min(self.lowest_return, average_return)
        self.attempt_best = average_return if self.attempt_best is None else max(self.attempt_best, average_return)
        band = self.band()
        if band is None or not band[0] < average_return < band[1]:
            self.stuck_since, self.stuck_evaluations = None, 0
            return False
        if self.stuck_since is None:
            self.stuck_since = train_step
        self.stuck_evaluations += 1
        if train_step - self.stuck_since < self.patience or self.stuck_evaluations < MIN_EVALUATIONS:
            return False
        self.stuck_since, self.stuck_evaluations, self.attempt_best = None, 0, None
        self.fired_band = band
        self.resets += 1
        return True
