"""Learner checkpoints that survive damaged files and failing writes.

TF-Agents' `common.Checkpointer` restores the latest checkpoint as it is built; a truncated `ckpt-N.data` file
(a full disk, a storage fault) then raises from TensorFlow's reader on every start, a crash loop under any
restart policy. `LearnerCheckpoints` reads every candidate back first, newest first: an unreadable one is moved
into `<checkpoint dir>/quarantine/` (named in the log) and the next older one is restored. With none readable it
starts fresh with a loud error in the log, as a first start would: the replay buffer and the actors carry on,
and the quarantined files stay for inspection. A save that fails (disk full, write error) removes its partial
files, so the previous checkpoint stays the latest readable one, and the learner keeps training; the next
interval tries again.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import time
from typing import Any

import tensorflow as tf
from tf_agents.utils import common

from dqn.process.runtime import free_space
from dqn.process.write_guard import first_line
from learner.checkpoint_layout import check_layout, record_settings
from learner.write_guard import WRITE_ERRORS

log = logging.getLogger("learner")


def _prefixes(directory: str) -> list[str]:
    """Checkpoint prefixes in `directory`, oldest first: the state file's list, plus any index file it misses."""
    listed: list[str] = []
    try:
        state = tf.train.get_checkpoint_state(directory)
    except (tf.errors.OpError, ValueError):  # an unreadable state file: fall back to the files themselves
        state = None
    if state is not None:
        listed = [os.path.abspath(os.path.join(directory, p)) for p in state.all_model_checkpoint_paths]
    found = [os.path.abspath(path[: -len(".index")]) for path in glob.glob(os.path.join(directory, "ckpt-*.index"))]
    prefixes = {*listed, *found}

    def number(prefix: str) -> int:
        try:
            return int(prefix.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            return -1

    return sorted(prefixes, key=number)


def unreadable(prefix: str) -> str | None:
    """Why the checkpoint at `prefix` cannot be restored (every tensor is read back), or None if it can."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_dtype_map():
            reader.get_tensor(name)
    except Exception as error:  # noqa: BLE001 - any failure to read it back makes it unusable
        return f"{type(error).__name__}: {error}".strip()
    return None


def set_aside_checkpoint_files(prefix: str) -> list[str]:
    """Moves every file of the checkpoint at `prefix` into `<its dir>/quarantine/`; returns the new paths."""
    target_dir = os.path.join(os.path.dirname(prefix), "quarantine")
    os.makedirs(target_dir, exist_ok=True)
    moved = []
    for path in sorted(glob.glob(glob.escape(prefix) + ".*")):
        target = os.path.join(target_dir, os.path.basename(path))
        if os.path.exists(target):
            target = f"{target}.{int(time.time())}"
        shutil.move(path, target)
        moved.append(target)
    return moved


class LearnerCheckpoints:
    """Restores the newest readable checkpoint into `objects` on construction; `save(step)` never raises.

    With `settings` (the learner's config), a checkpoint written by a Q-network of another layout is refused
    before anything is restored (learner/checkpoint_layout.py), and the settings are kept beside the checkpoints.
    """

    def __init__(self, directory: str, max_to_keep: int = 3, settings: Any = None, **objects: Any):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._set_aside_unreadable()
        if settings is not None:
            check_layout(directory, objects, settings)
            record_settings(directory, settings)
        self._checkpointer = common.Checkpointer(ckpt_dir=directory, max_to_keep=max_to_keep, **objects)
        self._checkpointer.initialize_or_restore()

    def _set_aside_unreadable(self) -> None:
        """Moves unreadable checkpoints aside, newest first, until one reads back; the state file then names it."""
        prefixes = _prefixes(self.directory)
        good = list(prefixes)
        for prefix in reversed(prefixes):
            reason = unreadable(prefix)
            if reason is None:
                break
            good.remove(prefix)
            moved = set_aside_checkpoint_files(prefix)
            log.error("learner checkpoint %s cannot be read (%s); moved it aside to %s", prefix, reason,
                      ", ".join(moved) or "(no files)")
        if good == prefixes:
            return
        state_file = os.path.join(self.directory, "checkpoint")
        if good:
            tf_logger = tf.get_logger()
            level = tf_logger.level
            tf_logger.setLevel(logging.ERROR)  # TF's only public writer of the state file logs a deprecation
            try:
                tf.compat.v1.train.update_checkpoint_state(self.directory, good[-1], all_model_checkpoint_paths=good)
            finally:
                tf_logger.setLevel(level)
            log.warning("restoring the newest readable learner checkpoint instead: %s", good[-1])
            return
        if os.path.exists(state_file):
            os.remove(state_file)
        log.error("NO READABLE LEARNER CHECKPOINT in %s: starting from a fresh network at train step 0. The "
                  "unreadable ones are in %s; restore a backup there and restart to resume from it instead",
                  self.directory, os.path.join(self.directory, "quarantine"))

    def restore_latest(self) -> str | None:
        """Restores the newest checkpoint written by this learner (or found at start); None where there is none."""
        latest = self._checkpointer.manager.latest_checkpoint
        if latest is None:
            return None
        self._checkpointer._checkpoint.restore(latest).expect_partial()  # noqa: SLF001 - the object graph it saved
        return latest

    def save(self, step: tf.Variable) -> bool:
        """Writes a checkpoint at `step`; on a write error logs it, removes the partial files, returns False."""
        number = int(step.numpy())
        try:
            self._checkpointer.save(global_step=step)
            return True
        except WRITE_ERRORS as error:
            self._remove_partial(number)
            log.error("learner checkpoint at train step %d failed (%s: %s; %s free in %s); the previous one is "
                      "kept, training goes on and the next checkpoint interval tries again", number,
                      type(error).__name__, first_line(error),
                      free_space(self.directory), self.directory)
            return False

    def _remove_partial(self, number: int) -> None:
        """Deletes what a failed save of checkpoint `number` left behind (never a listed, complete checkpoint)."""
        prefix = os.path.abspath(os.path.join(self.directory, f"ckpt-{number}"))
        if prefix in [os.path.abspath(p) for p in self._checkpointer.manager.checkpoints]:
            return
        for path in glob.glob(glob.escape(prefix) + ".*") + glob.glob(glob.escape(prefix) + "_temp*"):
            try:
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            except OSError:
                pass

