"""The replay checkpoint directory belongs to the replay server alone: checked at start, before Reverb touches it.

After each checkpoint Reverb keeps only the entry of its directory whose name sorts last and deletes every other
one. Anything else kept there is deleted at the first checkpoint, and a name that sorts after Reverb's timestamps
(a letter: `lost+found`, `notes.txt`, another role's folder) is kept instead of the checkpoint just written, which
is deleted: the server then runs with no checkpoint at all. So a directory that holds anything but Reverb's own
checkpoints is refused. Standard library only: `local` checks it before it starts any role.
"""

from __future__ import annotations

import os
import re

from dqn.errors import BadInput

#: A checkpoint's name: the time it was written, in absl's RFC 3339 format (`2026-11-27T20:58:35.769525565+00:00`).
CHECKPOINT_NAME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)")
#: What Reverb writes into a checkpoint: record files (tables, items, chunks), then DONE; a write cut short leaves
#: some of them.
CHECKPOINT_FILE = re.compile(r"DONE|\w+\.tfrecord")


class ForeignCheckpointEntries(BadInput):
    """The checkpoint directory holds entries Reverb would delete."""


def foreign_entries(checkpoint_dir: str) -> list[str]:
    """Entries of `checkpoint_dir` that are not replay checkpoints as Reverb writes them (none if it is missing)."""
    try:
        names = sorted(os.listdir(checkpoint_dir))
    except FileNotFoundError:
        return []
    foreign = []
    for name in names:
        path = os.path.join(checkpoint_dir, name)
        if not (CHECKPOINT_NAME.fullmatch(name) and os.path.isdir(path) and not os.path.islink(path)
                and all(CHECKPOINT_FILE.fullmatch(file) for file in os.listdir(path))):
            foreign.append(name)
    return foreign


def check_checkpoint_dir(checkpoint_dir: str) -> None:
    """Raises (exit 2, naming --checkpoint-dir and the fix) if the directory holds anything but replay checkpoints."""
    foreign = foreign_entries(checkpoint_dir)
    if not foreign:
        return
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise ForeignCheckpointEntries(
        f"--checkpoint-dir / DQN_CHECKPOINT_DIR {checkpoint_dir} holds entries that are not replay checkpoints: "
        f"{shown}. Reverb keeps only the entry whose name sorts last there and deletes the others after each "
        "checkpoint: it would delete these, and keep one of them instead of the checkpoint it just wrote. Fix: "
        f"give the replay server a directory of its own (e.g. {os.path.join(checkpoint_dir, 'checkpoints')}, a "
        "sub-directory of the same volume), or move those entries out.")
