"""The learner's summaries trigger: TensorBoard scalars (losses/*, charts/*, replay/*) and the progress file."""

from __future__ import annotations

import time
from typing import Any

from dqn.model.schedules import epsilon_at
from dqn.process.progress import write_progress
from dqn.remote.weights_publisher import WeightsPublisher
from learner.priority_updates import importance_beta
from learner.staged_trainer import BatchStats
from learner.stats import ReplayRates
from learner.write_guard import try_write


class LearnerSummaries:
    """The summaries trigger's work: rates since the last summary, replay stats and the batch of `slot`.

    `learner` is the `Learner` (learner/train.py) whose step, counters and writers it reports.
    """

    def __init__(self, learner: Any, rates: ReplayRates, batch_stats: BatchStats, publisher: WeightsPublisher):
        self._learner = learner
        self._rates = rates
        self._batch_stats = batch_stats
        self._publisher = publisher
        self._last = (time.monotonic(), learner.step)
        self.slot = 0  # the staged slot trained on last: its batch gives loss and mean Q

    def write(self, step: int) -> None:
        """Scalars and the progress file at train step `step`."""
        now = time.monotonic()
        last_time, last_step = self._last
        sgd_rate = (step - last_step) / max(now - last_time, 1e-9)
        self._last = (now, step)
        replay = self._rates.measure()
        try_write("summaries", self._write, step, self._batch_stats.measure(self.slot), sgd_rate, replay)

    def _write(self, step: int, batch_stats: tuple[float, float, int], sgd_rate: float, replay: dict) -> None:
        """`batch_stats`: (loss, mean max-Q, the target's actions its masks forbid) of the summarized batch."""
        learner, config = self._learner, self._learner.config
        if replay.get("inserts_per_sec"):
            # Uniform sampling from a FIFO buffer: sampled data is on average half a buffer old.
            replay["mean_data_age_train_steps"] = replay["size"] / 2 / replay["inserts_per_sec"] * sgd_rate
        loss_value, mean_q, illegal = batch_stats
        learner.illegal_target_actions += illegal
        refused = learner.refused_counts()
        scalars = {
            "losses/td_loss": loss_value,
            "charts/mean_q": mean_q,
            "charts/sgd_steps_per_sec": sgd_rate,
            "charts/epsilon_schedule": epsilon_at(config, step - int(learner.exploration_start.numpy())),
            "charts/publish_lag": step - max(self._publisher.published_step, 0),
            "charts/non_finite_updates": learner.non_finite.skipped_total,
            "charts/rollbacks": learner.non_finite.rollbacks,
            "charts/illegal_target_actions": learner.illegal_target_actions,
            **{f"charts/{name}": float(value) for name, value in refused.items()},
            **{f"replay/{key}": value for key, value in replay.items()},
        }
        if learner.priorities is not None:
            scalars.update({"replay/importance_beta": importance_beta(config, step),
                            "replay/priority_updates_sent": learner.priorities.sent,
                            "replay/priority_updates_dropped": learner.priorities.dropped,
                            "replay/priority_updates_failed": learner.priorities.failed})
        learner.scalars.write(step, scalars)
        write_progress(learner.directory, train_step=step, sgd_steps_per_sec=sgd_rate, loss=loss_value,
                       replay_size=replay.get("size", 0),
                       illegal_actions=learner.illegal_target_actions, **refused)
