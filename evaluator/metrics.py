"""Evaluation metrics: small objects that the episode loops (evaluator/episodes.py) feed, one value each.

As with TF-Agents' metrics, a metric is reset before an evaluation, fed while it runs and read with `result()`
after it. The evaluator writes each value into the evals.jsonl record under the metric's `name` and to
TensorBoard as `eval/<name>`. Adding a metric takes one class and one line in `EVAL_METRICS`.

There are two hooks:
- `on_episodes(episodes)`: called once per evaluation with each env's first-episode totals (return, length)
  and which of those episodes are whole. Both loops call it. `EpisodeMetric` builds on it: a subclass only
  computes its value from the whole episodes' returns and lengths.
- `on_step(rewards, step_types, counted)`: called at every env step with batched arrays. Only the numpy loop
  calls it. The graph loop keeps its env steps inside TF, and feeding Python at every step would cross the
  Python<->TF boundary at every step, where tensors keep their memory for good. So that loop refuses
  a metric that overrides `on_step`.

An episode that an env fault cut short says nothing about the policy, so every metric leaves it out
(`EpisodeTotals.whole`), and a metric with no whole episode left is NaN. `on_step` cannot know yet whether an
episode will be cut short, so a per-step metric keeps per-env figures and picks the whole episodes in
`on_episodes`.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class EpisodeTotals:
    """Each env's first episode of one evaluation: its return, its length, and whether it is whole.

    `whole` is False where an env fault cut the episode short. After a stop request the totals cover only the
    steps played so far.
    """

    returns: np.ndarray
    lengths: np.ndarray
    whole: np.ndarray

    @property
    def count(self) -> int:
        """How many episodes are whole (the ones that metrics count)."""
        return int(self.whole.sum())


class EvalMetric:
    """One evaluation metric. A subclass sets `name`, overrides `result` and one or both hooks."""

    name: str = ""

    def reset(self, num_envs: int) -> None:
        """Called before each evaluation of `num_envs` episodes played side by side."""

    def on_step(self, rewards: np.ndarray, step_types: np.ndarray, counted: np.ndarray) -> None:
        """One step of every env (numpy loop only). The arrays are valid only during the call.

        `counted` marks the envs whose step belongs to their first episode. Envs whose first episode has ended
        keep stepping, and their steps do not count.
        """

    def on_episodes(self, episodes: EpisodeTotals) -> None:
        """Called with the evaluation's episodes once they have ended (both loops)."""

    def result(self) -> float:
        """The value after an evaluation; NaN when no episode was whole."""
        raise NotImplementedError

    @classmethod
    def needs_steps(cls) -> bool:
        """True if the metric overrides `on_step` (so only the numpy loop can feed it)."""
        return cls.on_step is not EvalMetric.on_step


class EpisodeMetric(EvalMetric):
    """A metric of the whole episodes' totals. A subclass defines `compute` and never sees a cut-short episode."""

    _value = float("nan")

    def compute(self, returns: np.ndarray, lengths: np.ndarray) -> float:
        """The value, from the returns and lengths of the whole episodes (at least one)."""
        raise NotImplementedError

    def reset(self, num_envs: int) -> None:
        """Forgets the last evaluation's value."""
        self._value = float("nan")

    def on_episodes(self, episodes: EpisodeTotals) -> None:
        """Computes the value over the whole episodes; NaN if there are none."""
        whole = episodes.whole
        self._value = float(self.compute(episodes.returns[whole], episodes.lengths[whole])) if whole.any() \
            else float("nan")

    def result(self) -> float:
        """The value of the last evaluation."""
        return self._value


class AverageReturn(EpisodeMetric):
    """The mean undiscounted return. The evaluator scores a policy by this value."""

    name = "average_return"

    def compute(self, returns: np.ndarray, lengths: np.ndarray) -> float:
        """Mean of the returns."""
        return returns.mean()


class AverageEpisodeLength(EpisodeMetric):
    """The mean episode length in agent steps."""

    name = "average_episode_length"

    def compute(self, returns: np.ndarray, lengths: np.ndarray) -> float:
        """Mean of the lengths."""
        return lengths.mean()


#: The metrics of every evaluation, in the order their values appear in records and in the log line.
#: `AverageReturn` must stay: it is the score that ranks policies.
EVAL_METRICS: list[type[EvalMetric]] = [AverageReturn, AverageEpisodeLength]


def make_metrics() -> list[EvalMetric]:
    """A fresh instance of every registered metric; a name used twice is an error."""
    metrics = [metric() for metric in EVAL_METRICS]
    names = [metric.name for metric in metrics]
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"evaluation metrics need distinct, non-empty names: {names}")
    return metrics
