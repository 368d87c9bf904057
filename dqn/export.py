"""Greedy-policy SavedModels, written so a reader never sees a half-written directory."""

from __future__ import annotations

import logging
import os
import shutil

from tf_agents.policies import policy_saver

log = logging.getLogger(__name__)


def export_policy(saver: policy_saver.PolicySaver, directory: str, step: int) -> None:
    """Saves the greedy policy as a SavedModel, replacing the previous export atomically.

    Pass the same `saver` every time: each new PolicySaver traces fresh functions that TF keeps for the life of
    the process (~4 MiB of learner RSS per export measured; one reused saver ~0.75 MiB).
    """
    tmp = f"{directory}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    saver.save(tmp)
    old = f"{directory}.old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(directory):
        os.replace(directory, old)
    os.replace(tmp, directory)
    shutil.rmtree(old, ignore_errors=True)
    log.info("exported greedy policy of step %d to %s", step, directory)
