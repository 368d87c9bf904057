"""When a run stuck partway to its target should start learning afresh.

DQN's greedy policy often rises, falls back and then stays on a plateau far below the target for a long time;
the same network, trained on, rarely leaves that plateau soon, while a fresh Q-network with a restarted epsilon
schedule usually solves about as fast as a fresh run does: the stuck network's values fit the one habit its
replay holds, and a fresh one explores again. The rule is written in evaluation terms only, so
it holds for any env with a target return. A run is stuck when, for `patience` train steps and at least
`MIN_EVALUATIONS` evaluations in a row, every greedy average stayed in the band

- above `FLOOR_FRACTION` of the way from the run's lowest evaluation (about random play) to the target: an
  evaluation at the random level is what a still-learning policy of a hard-exploration env (Acrobot-v1,
  MountainCar-v0) scores between its successes, and it says nothing about being stuck, so it ends the streak;
- below halfway from the lowest evaluation to the current attempt's best, and below halfway to the target: the
  policy has fallen back from what it once played, and is not close to solving.

An evaluation outside the band ends the streak. A run is also stuck when it **stalled** low: its attempt never
came far (so its plateau need not lie below halfway to its best), and for `STALL_FACTOR` times the patience, and
for at least as long as the attempt took to reach its best, every evaluation lay above the floor and below halfway
to the target without beating that best, and the later half of those evaluations did not score better (by their
median) than the earlier half. Scaling with the time to the best, and the trend, leave slow learners alone: a run
that needed many train steps for its best gets as many more, and a run whose best was one lucky early
evaluation, but whose later evaluations keep rising, is left to rise.

The lowest evaluation rather than the first is the reference because an untrained network's greedy policy can be
lucky, and a floor measured from a lucky first evaluation can lie above the plateau the run later gets stuck on.
Never once the target is met; never without a target. After a reset the next attempt has its own best and must be
stuck again, for the full patience, before it is reset again.
"""

from __future__ import annotations

import dataclasses
import statistics

#: Evaluations at or below this fraction of the way from the lowest evaluation to the target end a streak.
FLOOR_FRACTION = 0.1
#: A streak needs at least this many evaluations (each a noisy average) however long it lasts in train steps.
MIN_EVALUATIONS = 5
#: A stall (no new best, below halfway to the target) must last this many times the patience.
STALL_FACTOR = 4


@dataclasses.dataclass
class FallbackResetRule:
    """Feeds on (train step, greedy average) pairs; says when the learner should start its Q-network afresh."""

    patience: int
    target: float | None
    lowest_return: float | None = None  # the run's lowest greedy average: about random play
    attempt_best: float | None = None  # best greedy average since the run's start or its last reset
    stuck_since: int | None = None  # train step of the first evaluation of the current in-band streak
    stuck_evaluations: int = 0
    attempt_start: int | None = None  # train step of the attempt's first evaluation
    best_step: int | None = None  # train step of the attempt's best evaluation
    stall_since: int | None = None  # first evaluation of the current streak below halfway to the target, no new best
    stall_returns: list[float] = dataclasses.field(default_factory=list)  # the stall streak's evaluations
    fired_band: tuple[float, float] | None = None  # the band of the streak that asked for the last reset

    def band(self) -> tuple[float, float] | None:
        """(floor, ceiling) of the stuck band, or None where there is no target or no evaluation yet."""
        if self.target is None or self.lowest_return is None or self.target <= self.lowest_return:
            return None
        best = self.attempt_best if self.attempt_best is not None else self.lowest_return
        ceiling = min(self.halfway(), self.lowest_return + 0.5 * (best - self.lowest_return))
        return self.lowest_return + FLOOR_FRACTION * (self.target - self.lowest_return), ceiling

    def observe(self, train_step: int, average_return: float, solved: bool = False) -> bool:
        """Records one evaluation; True when the learner should reset now (the next attempt starts afresh)."""
        if self.patience <= 0 or solved:
            return False
        self.lowest_return = average_return if self.lowest_return is None else min(self.lowest_return, average_return)
        if self.attempt_start is None:
            self.attempt_start = train_step
        new_best = self.attempt_best is None or average_return > self.attempt_best
        if new_best:
            self.attempt_best, self.best_step = average_return, train_step
        band = self.band()
        if band is None:
            return False
        fell_back = self._fell_back(train_step, band, average_return)
        stalled = self._stalled(train_step, band[0], average_return, new_best)
        if not (fell_back or stalled):
            return False
        self.stuck_since, self.stuck_evaluations, self.stall_since, self.stall_returns = None, 0, None, []
        self.attempt_best, self.best_step, self.attempt_start = None, None, None
        self.fired_band = band if fell_back else (band[0], self.halfway())
        return True

    def halfway(self) -> float:
        """Halfway from the lowest evaluation to the target."""
        return self.lowest_return + 0.5 * (self.target - self.lowest_return)

    def _fell_back(self, train_step: int, band: tuple[float, float], average_return: float) -> bool:
        """Counts the streak in the band below halfway to the attempt's best; True once it lasted the patience."""
        if not band[0] < average_return < band[1]:
            self.stuck_since, self.stuck_evaluations = None, 0
            return False
        if self.stuck_since is None:
            self.stuck_since = train_step
        self.stuck_evaluations += 1
        return train_step - self.stuck_since >= self.patience and self.stuck_evaluations >= MIN_EVALUATIONS

    def _stalled(self, train_step: int, floor: float, average_return: float, new_best: bool) -> bool:
        """Counts the streak below halfway to the target without a new best; True once it lasted long enough."""
        if new_best or not floor < average_return < self.halfway():
            self.stall_since, self.stall_returns = None, []
            return False
        if self.stall_since is None:
            self.stall_since = train_step
        self.stall_returns.append(average_return)
        needed = max(STALL_FACTOR * self.patience, self.best_step - self.attempt_start)
        count = len(self.stall_returns)
        if train_step - self.stall_since < needed or count < 2 * MIN_EVALUATIONS:
            return False
        earlier, later = self.stall_returns[:count // 2], self.stall_returns[count - count // 2:]
        return statistics.median(later) <= statistics.median(earlier)
