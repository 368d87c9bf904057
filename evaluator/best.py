"""The best policy the evaluator has seen, kept so a finished run leaves the policy that scored best.

DQN's greedy return oscillates from one evaluation to the next, so the learner's final checkpoint is often not
the policy that solved. Policies are ranked by their score: the average return on fresh confirmation episodes
when the evaluator re-checks candidates (`eval_confirm_episodes`), else the evaluation's own average. The highest
of many noisy evaluation averages overrates its policy; episodes that took no part in choosing it do not.
On every new best score the weights go to `best_weights.npz` (one small write; it survives restarts), and when
the evaluator stops, that policy is exported as a SavedModel to `best_policy/` with `best_policy.json` (train
step, average and confirmed return) beside it. The export runs once, at stop, because tracing a PolicySaver costs
CPU that would otherwise compete with training.
"""

from __future__ import annotations

import io
import json
import logging
import os

import numpy as np
from tf_agents.policies import policy_saver

from dqn.files import atomic_write
from dqn.model.flat_weights import FlatWeights
from dqn.model.policy_export import export_policy

log = logging.getLogger("evaluator")
#: The kept policy's train step and scores, written beside its export.
BEST_POLICY_FILE = "best_policy.json"


def kept_score(average_return: float, confirmed_return: float | None) -> float:
    """What a kept policy is ranked by: its confirmed return if it was re-checked, else its average return."""
    return average_return if confirmed_return is None else confirmed_return


def reaches_target(average_return: float, confirmed_return: float | None, target: float | None,
                   rechecks: bool) -> bool:
    """Whether a policy's scores reach `target`.

    Where the evaluator re-checks, the re-check's average decides (the evaluation's own average only chose the policy
    for one); without re-checks, the evaluation's average.
    """
    if target is None:
        return False
    if rechecks:
        return confirmed_return is not None and confirmed_return >= target
    return average_return >= target


def standard_error(returns: np.ndarray) -> float:
    """The standard error of the mean of `returns` (0 for fewer than two: no spread to go by)."""
    returns = np.asarray(returns, np.float64)
    return float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1 else 0.0


class BestPolicy:
    """Tracks the best-scoring published weights in `directory`; `export()` writes them as a SavedModel."""

    def __init__(self, directory: str, policy, policy_weights: FlatWeights):
        self._policy = policy
        self._policy_weights = policy_weights
        self._weights_path = os.path.join(directory, "best_weights.npz")
        self.export_dir = os.path.join(directory, "best_policy")
        self._meta_path = os.path.join(directory, BEST_POLICY_FILE)
        self.train_step: int | None = None
        self.average_return = float("-inf")
        self.confirmed_return: float | None = None
        self._variables: list[np.ndarray] | None = None
        self._load()
        # After a restart, export again unless best_policy/ already holds this best (a killed evaluator may have
        # found a new best that it never exported).
        self._exported = self._variables is None or self._exported_step() == self.train_step

    def _load(self) -> None:
        """The best of an earlier run of this evaluator (same root), unless its shapes no longer fit."""
        if not os.path.exists(self._weights_path):
            return
        with np.load(self._weights_path) as saved:
            variables = [saved[f"variable_{i}"] for i in range(int(saved["count"]))]
            train_step, average_return = int(saved["train_step"]), float(saved["average_return"])
            confirmed = float(saved["confirmed_return"]) if "confirmed_return" in saved.files else None
        if [tuple(v.shape) for v in variables] != self._policy_weights.shapes:
            log.warning("ignoring %s: its shapes do not fit this network (config changed?)", self._weights_path)
            return
        self._variables, self.train_step, self.average_return = variables, train_step, average_return
        self.confirmed_return = None if confirmed is None or np.isnan(confirmed) else confirmed
        log.info("best policy so far: train step %d, score %.1f", train_step, self.score)

    @property
    def score(self) -> float:
        """What the kept policy is ranked by (`kept_score`)."""
        return kept_score(self.average_return, self.confirmed_return)

    def reaches(self, target: float | None, rechecks: bool) -> bool:
        """True if the kept policy reaches `target` (`reaches_target`; `rechecks`: the evaluator re-checks)."""
        return self.train_step is not None and reaches_target(self.average_return, self.confirmed_return, target,
                                                              rechecks)

    def is_candidate(self, train_step: int, average_return: float) -> bool:
        """True if an evaluation could replace the kept best: trained weights whose average beats its score."""
        return train_step > 0 and average_return > self.score

    def _exported_step(self) -> int | None:
        """The train step of the policy in best_policy/, from best_policy.json (written after the export)."""
        try:
            with open(self._meta_path, encoding="utf-8") as handle:
                return int(json.load(handle)["train_step"])
        except (FileNotFoundError, ValueError, KeyError):
            return None

    def offer(self, train_step: int, average_return: float, variables: list[np.ndarray],
              confirmed_return: float | None = None) -> bool:
        """Keeps `variables` if their score (`confirmed_return`, else `average_return`) beats the best's; True if so.

        The initial weights (train step 0) are never kept: a lucky untrained network is not a policy to hand out.
        """
        score = kept_score(average_return, confirmed_return)
        if not self.is_candidate(train_step, average_return) or score <= self.score:
            return False
        self._variables, self.train_step, self.average_return = list(variables), train_step, average_return
        self.confirmed_return = confirmed_return
        self._exported = False
        # The archive is built in memory: np.savez on the file itself leaves an unclosed ZipFile behind when the disk
        # is full, whose finaliser later prints a traceback about the closed file; here only the write can fail.
        archive = io.BytesIO()
        np.savez(archive, count=len(variables), train_step=train_step, average_return=average_return,
                 confirmed_return=np.nan if confirmed_return is None else confirmed_return,
                 **{f"variable_{i}": v for i, v in enumerate(variables)})
        with atomic_write(self._weights_path, "wb") as handle:
            handle.write(archive.getbuffer())
        return True

    def export(self) -> None:
        """Writes the best policy as a SavedModel (if it changed since the last export) and its json."""
        if self._exported or self._variables is None:
            return
        self._policy_weights.assign(self._variables)
        export_policy(policy_saver.PolicySaver(self._policy, batch_size=None), self.export_dir, self.train_step)
        with atomic_write(self._meta_path) as handle:  # a reader (or a restart) never sees half of it
            json.dump({"train_step": self.train_step, "average_return": self.average_return,
                       "confirmed_return": self.confirmed_return}, handle)
        self._exported = True
