"""A learner checkpoint is restored only into a Q-network of the layout that wrote it.

TF restores a checkpoint into whatever objects it is given, and the learner must accept a partial match (the
optimizer makes its slots at the first update). So a network whose layers changed between starts (`--layer-norm`
adds two variables per hidden layer; a longer `--fc-layer-params` adds a layer) would resume partly fresh without
a word, and a reshaped layer would fail deep inside TensorFlow. Before restoring, the learner compares the
checkpoint's Q-network variables (names and shapes) with those of the network it built; on a difference it stops
with an error naming the settings that changed, from the settings file kept beside the checkpoints.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import tempfile
from typing import Any

import tensorflow as tf

from dqn.model.networks import layout_changes
from dqn.process.runtime import free_space
from dqn.process.write_guard import WRITE_ERRORS, first_line
from dqn.settings.loading import ConfigError, read_config_file, to_dict, write_config

log = logging.getLogger("learner")

#: Beside the checkpoints: the settings of the start that last wrote there (read only to name a difference).
SETTINGS_FILE = "settings.json"
#: The checkpoint keys of the online and target Q-networks (TF-Agents' attribute names under `agent`).
NETWORK_KEYS = ("agent/_q_network/", "agent/_target_q_network/")


def network_shapes(prefix: str) -> dict[str, tuple[int, ...]]:
    """The Q-networks' variables in the checkpoint at `prefix`: key -> shape (optimizer slots left out)."""
    return {name: tuple(shape) for name, shape in tf.train.list_variables(prefix)
            if name.startswith(NETWORK_KEYS) and ".OPTIMIZER_SLOT" not in name}


def built_shapes(objects: dict[str, Any], scratch_dir: str) -> dict[str, tuple[int, ...]] | None:
    """The same for `objects` as built now: written once to a scratch directory and read back (public API only).

    None where it cannot be written (a full disk), with a warning: the start then goes on without the check.
    """
    for stale in glob.glob(os.path.join(scratch_dir, ".layout-*")):  # left by a start killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    directory = None
    try:
        directory = tempfile.mkdtemp(prefix=".layout-", dir=scratch_dir)
        return network_shapes(tf.train.Checkpoint(**objects).write(os.path.join(directory, "now")))
    except WRITE_ERRORS as error:
        log.warning("could not compare the checkpoint's network layout with this start's (%s: %s; %s free in %s): "
                    "restoring without the check", type(error).__name__, first_line(error), free_space(scratch_dir),
                    scratch_dir)
        return None
    finally:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)


def layout_difference(saved: dict[str, tuple[int, ...]], built: dict[str, tuple[int, ...]]) -> str | None:
    """How the built network's variables differ from the saved ones, in a few words; None where they match."""
    only_built = sorted(built.keys() - saved.keys())
    only_saved = sorted(saved.keys() - built.keys())
    reshaped = sorted(key for key in built.keys() & saved.keys() if built[key] != saved[key])

    def named(keys: list[str]) -> str:
        shown = ", ".join(key.split("/.ATTRIBUTES")[0] for key in keys[:3])
        return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

    parts = [f"{len(keys)} {what} ({named(keys)})" for keys, what in (
        (only_built, "variable(s) it lacks"), (only_saved, "variable(s) this network has no place for"))
        if keys]
    parts += [f"{key.split('/.ATTRIBUTES')[0]} is {list(saved[key])} there, {list(built[key])} here"
              for key in reshaped[:3]]
    return "; ".join(parts) or None


def check_layout(directory: str, objects: dict[str, Any], config: Any) -> None:
    """ConfigError if the newest checkpoint in `directory` was written by a network of another layout.

    Nothing is restored or changed on the error: the checkpoints stay as they are for a start with their settings.
    """
    latest = tf.train.latest_checkpoint(directory)
    built = None if latest is None else built_shapes(objects, directory)
    difference = None if built is None else layout_difference(network_shapes(latest), built)
    if difference is None:
        return
    try:
        recorded = read_config_file(os.path.join(directory, SETTINGS_FILE))
    except ConfigError:  # none (an older version wrote the checkpoint) or unreadable: the difference alone is told
        recorded = {}
    changed = layout_changes(recorded, to_dict(config))
    why = (f"settings that shape it differ from the start that wrote it: {', '.join(changed)}" if changed else
           "no recorded setting that shapes it differs, so the env's observations or actions must have changed")
    raise ConfigError(changed[0].split(" ")[0] if changed else "root_dir",
                      f"the learner checkpoint {latest} was written by a Q-network of another layout than this start "
                      f"builds: {difference}. The {why}. To resume that run, start it with the settings it was "
                      "written with; to train this network, give a new --root-dir (the checkpoint is left as it is)")


def record_settings(directory: str, config: Any) -> None:
    """Writes this start's settings beside the checkpoints once its network is known to fit (a failed write: logged)."""
    try:
        write_config(config, os.path.join(directory, SETTINGS_FILE))
    except WRITE_ERRORS as error:
        log.warning("could not record this start's settings in %s (%s: %s; %s free)", directory,
                    type(error).__name__, first_line(error), free_space(directory))
