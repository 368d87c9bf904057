"""Evaluation metrics: small objects that the episode loops (evaluator/episodes.py) feed, one value each.

As with TF-Agents' metrics, a metric is reset before an evaluation, fed while it runs and read with `result()`
after it. Each is built with a `MetricContext` (what the run's evaluation knows: the env, its action spec, the
target return), so a metric needs no global state. The evaluator writes each value to TensorBoard as
`eval/<name>` and into the evals.jsonl record under `metrics`, except the average return, which is the record's own
`average_return` field: it is the evaluation's score, which the evaluator and `dqn-service local` rank and decide
by. Adding a metric takes one class and one line in `EVAL_METRICS`.

There are two hooks:
- `on_episodes(episodes)`: called once per evaluation with each env's first episode (return, length, final info)
  and which of those episodes are whole. Both loops call it. `EpisodeMetric` builds on it: a subclass only
  computes its value from the whole episodes.
- `on_step(rewards, step_types, counted)`: called at every env step with batched arrays. Only the numpy loop
  calls it. The graph loop keeps its env steps inside TF, and feeding Python at every step would cross the
  Python<->TF boundary at every step, where tensors keep their memory for good. So that loop refuses
  a metric that overrides `on_step`.

An episode that an env fault cut short says nothing about the policy, so every metric leaves it out
(`EpisodeTotals.whole`), and a metric with no whole episode left is NaN. `on_step` cannot know yet whether an
episode will be cut short, so a per-step metric keeps per-env figures and picks the whole episodes in
`on_episodes`. A metric whose result is None is not reported for that evaluation (as the success rate of an env
that does not report success).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class MetricContext:
    """What a metric may need to know about the evaluation it scores."""

    env_id: str
    action_spec: Any  # the env's action spec (a TF-Agents BoundedArraySpec)
    target_return: float | None = None  # the return that counts as solved (target_return, else the env's threshold)


@dataclasses.dataclass(frozen=True)
class EpisodeTotals:
    """Each env's first episode of one evaluation: its return, length, final info, and whether it is whole.

    `whole` is False where an env fault cut the episode short. `final_infos[i]` is the info of the step that
    ended env i's episode (an empty dict where it has not ended). After a stop request the totals cover only the
    steps played so far.
    """

    returns: np.ndarray
    lengths: np.ndarray
    whole: np.ndarray
    final_infos: tuple[dict, ...]

    @property
    def count(self) -> int:
        """How many episodes are whole (the ones that metrics count)."""
        return int(self.whole.sum())

    def whole_only(self) -> EpisodeTotals:
        """The whole episodes alone."""
        infos = tuple(info for info, whole in zip(self.final_infos, self.whole, strict=True) if whole)
        return EpisodeTotals(self.returns[self.whole], self.lengths[self.whole],
                             np.ones(len(infos), dtype=bool), infos)


class EvalMetric:
    """One evaluation metric. A subclass sets `name`, overrides `result` and one or both hooks.

    `context` is the evaluation's `MetricContext`.
    """

    name: str = ""

    def __init__(self, context: MetricContext):
        self.context = context

    def reset(self, num_envs: int) -> None:
        """Called before each evaluation of `num_envs` episodes played side by side."""

    def on_step(self, rewards: np.ndarray, step_types: np.ndarray, counted: np.ndarray) -> None:
        """One step of every env (numpy loop only). The arrays are valid only during the call.

        `counted` marks the envs whose step belongs to their first episode. Envs whose first episode has ended
        keep stepping, and their steps do not count.
        """

    def on_episodes(self, episodes: EpisodeTotals) -> None:
        """Called with the evaluation's episodes once they have ended (both loops)."""

    def result(self) -> float | None:
        """The value after an evaluation; NaN when no episode was whole; None when it is not reported."""
        raise NotImplementedError

    @classmethod
    def needs_steps(cls) -> bool:
        """True if the metric overrides `on_step` (so only the numpy loop can feed it)."""
        return cls.on_step is not EvalMetric.on_step


class EpisodeMetric(EvalMetric):
    """A metric of the whole episodes. A subclass defines `compute` and never sees a cut-short episode."""

    _value: float | None = float("nan")

    def compute(self, episodes: EpisodeTotals) -> float | None:
        """The value from the whole episodes (at least one), or None if this evaluation has none to report."""
        raise NotImplementedError

    def reset(self, num_envs: int) -> None:
        """Forgets the last evaluation's value."""
        self._value = float("nan")

    def on_episodes(self, episodes: EpisodeTotals) -> None:
        """Computes the value over the whole episodes; NaN if there are none."""
        value = self.compute(episodes.whole_only()) if episodes.count else float("nan")
        self._value = None if value is None else float(value)

    def result(self) -> float | None:
        """The value of the last evaluation."""
        return self._value


class AverageReturn(EpisodeMetric):
    """The mean undiscounted return. The evaluator scores a policy by this value."""

    name = "average_return"

    def compute(self, episodes: EpisodeTotals) -> float:
        """Mean of the returns."""
        return episodes.returns.mean()


class AverageEpisodeLength(EpisodeMetric):
    """The mean episode length in agent steps."""

    name = "average_episode_length"

    def compute(self, episodes: EpisodeTotals) -> float:
        """Mean of the lengths."""
        return episodes.lengths.mean()


class SuccessRate(EpisodeMetric):
    """The share of episodes whose final info says `is_success`, as gymnasium-robotics' goal envs report it.

    Only episodes whose final info has the key count; an evaluation where none has it reports no success rate,
    so an env that never reports success gets no metric rather than a constant 0.
    """

    name = "success_rate"

    def compute(self, episodes: EpisodeTotals) -> float | None:
        """Mean of `bool(is_success)` over the episodes that report it; None if none does."""
        flags = [bool(info["is_success"]) for info in episodes.final_infos if "is_success" in info]
        return float(np.mean(flags)) if flags else None


#: The metrics of every evaluation, in the order their values appear in records and in the log line.
#: `AverageReturn` must stay: it is the score that ranks policies.
EVAL_METRICS: list[type[EvalMetric]] = [AverageReturn, AverageEpisodeLength, SuccessRate]


def make_metrics(context: MetricContext) -> list[EvalMetric]:
    """A fresh instance of every registered metric, built with `context`; a name used twice is an error."""
    metrics = [metric(context) for metric in EVAL_METRICS]
    names = [metric.name for metric in metrics]
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"evaluation metrics need distinct, non-empty names: {names}")
    return metrics
