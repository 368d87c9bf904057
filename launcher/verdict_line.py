"""The bottleneck verdict on `local`'s progress line and in `status --root-dir`, from the replay server's file.

The replay server judges the run from the reports its roles send it and publishes the verdict in its `verdict`
table, where `dqn-service status` reads it. `local`'s roles listen in a network namespace of their own, out of the
launcher's reach, so `local` reads the copy the replay server keeps beside its progress file: the same verdict.
"""

from __future__ import annotations

import os

from dqn.process.progress import VERDICT_FILE, read_progress
from dqn.settings.config import role_dir


def read_verdict(root_dir: str) -> dict | None:
    """The replay server's latest verdict in the run directory `root_dir`, or None before its first."""
    return read_progress(os.path.join(root_dir, role_dir("replay-server")), VERDICT_FILE) or None


def short_verdict(verdict: dict) -> str:
    """The part and the capacity figure that goes with it, short enough for the progress line."""
    part, figures = verdict.get("part", "?"), verdict.get("figures", {})
    if part == "warming up" or "actors_before_learner_binds" not in figures:
        return part
    return f"{part}, ≈{figures['actors_before_learner_binds']:.1f} actors keep the learner busy"
