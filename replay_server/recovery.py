"""Replay checkpoints on disk: corrupt ones set aside, partial ones removed.

Reverb names no file and has no fallback when a checkpoint is corrupt, and leaves the partial directory of a
write that failed behind.
"""

from __future__ import annotations

import glob
import os
import shutil
import time

import tensorflow as tf


def complete_checkpoints(checkpoint_dir: str) -> list[str]:
    """Checkpoint dirs with a DONE marker, oldest first (names are ISO timestamps, so they sort)."""
    return sorted(os.path.dirname(done) for done in glob.glob(os.path.join(checkpoint_dir, "*", "DONE")))


def unreadable_files(checkpoint_path: str) -> list[str]:
    """Record files of a checkpoint that do not read back (Reverb writes them ZLIB-compressed)."""
    bad = []
    for path in sorted(glob.glob(os.path.join(checkpoint_path, "*.tfrecord"))):
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type="ZLIB"):
                pass
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
            bad.append(path)
    return bad


def set_aside_checkpoint_dir(checkpoint_path: str, quarantine_dir: str) -> str:
    """Moves a checkpoint dir into `quarantine_dir` (kept for inspection, never loaded); returns its new path.

    A move that fails (no space there) leaves the checkpoint where it was and removes the partial copy.
    """
    os.makedirs(quarantine_dir, exist_ok=True)
    target = os.path.join(quarantine_dir, f"{os.path.basename(checkpoint_path.rstrip('/'))}-{int(time.time())}")
    try:
        shutil.move(checkpoint_path, target)
    except OSError:
        if os.path.exists(os.path.join(checkpoint_path, "DONE")):  # the original is whole: drop the partial copy
            shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def remove_partial_checkpoints(checkpoint_dir: str) -> list[str]:
    """Deletes checkpoint dirs without a DONE marker (a failed or interrupted write); returns them.

    Call only while no checkpoint is being written: Reverb writes DONE last.
    """
    removed = []
    for path in sorted(glob.glob(os.path.join(checkpoint_dir, "*"))):
        if os.path.isdir(path) and not os.path.exists(os.path.join(path, "DONE")):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed

