"""Learner checkpoints: a truncated one is quarantined and the next older restored; failed writes keep the last; one
of another network layout is refused."""

import errno
import glob
import io
import logging
import os
import sys
from dataclasses import replace

import pytest
import tensorflow as tf

from dqn.model.networks import NETWORK_SETTINGS, make_q_network
from dqn.process.runtime import setup_logging
from dqn.resolve import resolve_settings, resolved_builder, run_env_specs
from dqn.settings.config import LearnerConfig
from dqn.settings.loading import ConfigError
from learner.checkpoint_layout import SETTINGS_FILE
from learner.checkpoints import LearnerCheckpoints, unreadable
from learner.write_guard import WriteGuard
from tests.fs import fill, small_filesystem


def checkpoints_of(directory, config=None, settings=None):
    bundle = resolved_builder(config or LearnerConfig(fc_layer_params=(32,))).agent
    return bundle, LearnerCheckpoints(str(directory), settings=settings, agent=bundle.agent,
                                      train_step=bundle.train_step)


def save_at(bundle, checkpoints, step):
    bundle.train_step.assign(step)
    bundle.q_network.variables[0].assign(tf.fill(bundle.q_network.variables[0].shape, float(step)))
    assert checkpoints.save(bundle.train_step)


def truncate(prefix):
    (data,) = glob.glob(prefix + ".data-*")
    size = os.path.getsize(data)
    with open(data, "r+b") as handle:
        handle.truncate(size // 2)


def test_truncated_latest_checkpoint_is_quarantined_and_the_previous_restored(tmp_path, caplog):
    directory = tmp_path / "checkpoints"
    bundle, checkpoints = checkpoints_of(directory)
    for step in (100, 200, 300):
        save_at(bundle, checkpoints, step)
    truncate(str(directory / "ckpt-300"))
    assert unreadable(str(directory / "ckpt-300")) is not None
    with pytest.raises((IndexError, tf.errors.OpError)):  # without the quarantine: fails every start
        tf.train.Checkpoint(agent=resolved_builder(LearnerConfig(fc_layer_params=(32,))).agent.agent).restore(
            str(directory / "ckpt-300"))

    with caplog.at_level(logging.ERROR, logger="learner"):
        restored, checkpoints = checkpoints_of(directory)
    assert int(restored.train_step.numpy()) == 200
    assert float(restored.q_network.variables[0].numpy().flat[0]) == 200.0
    quarantined = sorted(os.listdir(directory / "quarantine"))
    assert quarantined and all(name.startswith("ckpt-300.") for name in quarantined)
    assert f"{directory / 'ckpt-300'} cannot be read" in caplog.text
    save_at(restored, checkpoints, 400)  # and the next save goes on from there
    assert int(checkpoints_of(directory)[0].train_step.numpy()) == 400


def directory_state(directory):
    return {name: os.path.getmtime(directory / name) for name in sorted(os.listdir(directory))}


def refused(directory, config):
    with pytest.raises(ConfigError) as error:
        checkpoints_of(directory, config, settings=config)
    assert "new --root-dir" in str(error.value) and "ckpt-100" in str(error.value)
    return error.value


def test_a_checkpoint_of_another_network_layout_is_refused_naming_the_setting_and_kept(tmp_path):
    directory = tmp_path / "checkpoints"
    config = LearnerConfig(fc_layer_params=(32,))
    bundle, checkpoints = checkpoints_of(directory, config, settings=config)
    save_at(bundle, checkpoints, 100)
    before = directory_state(directory)
    assert SETTINGS_FILE in before

    error = refused(directory, replace(config, layer_norm=True))  # variables the checkpoint lacks
    assert error.field_name == "layer_norm" and "gamma" in str(error) and "then False, now True" in str(error)
    assert refused(directory, replace(config, fc_layer_params=(32, 32))).field_name == "fc_layer_params"  # a layer
    assert "is [4, 32] there, [4, 16] here" in str(refused(directory, replace(config, fc_layer_params=(16,))))
    assert directory_state(directory) == before  # nothing restored into, moved or rewritten

    os.remove(directory / SETTINGS_FILE)  # a checkpoint of an older version: the difference is still found
    assert refused(directory, replace(config, layer_norm=True)).field_name == "root_dir"
    restored, _ = checkpoints_of(directory, config, settings=config)  # its own settings: it resumes
    assert int(restored.train_step.numpy()) == 100
    assert float(restored.q_network.variables[0].numpy().flat[0]) == 100.0


def test_a_layer_normalised_checkpoint_is_refused_by_a_plain_network(tmp_path):
    directory = tmp_path / "checkpoints"
    config = LearnerConfig(fc_layer_params=(32,), layer_norm=True)
    bundle, checkpoints = checkpoints_of(directory, config, settings=config)
    save_at(bundle, checkpoints, 100)
    error = refused(directory, replace(config, layer_norm=False))  # values no variable takes
    assert error.field_name == "layer_norm" and "no place for" in str(error)


def test_the_layout_settings_name_every_setting_the_q_network_is_built_from():
    read = set()

    class Recording:  # the config as make_q_network sees it, noting each setting it reads
        def __init__(self, config):
            self.config = config

        def __getattr__(self, name):
            read.add(name)
            return getattr(self.config, name)

    for config in (LearnerConfig(fc_layer_params=(32,)), LearnerConfig(fc_layer_params=(32,), layer_norm=True),
                   LearnerConfig(fc_layer_params=(32,), lstm_size=(8,))):
        config = resolve_settings(config)
        specs = run_env_specs(config)
        make_q_network(Recording(config), specs.observation, specs.action)
    # conv_layers() reads conv_layer_params; compute_dtype leaves the variables (and their keys) as they are.
    assert {"conv_layers", "fc_layer_params", "layer_norm", "lstm_size"} <= read
    assert read - {"conv_layers", "compute_dtype"} <= set(NETWORK_SETTINGS), read


def test_no_readable_checkpoint_starts_fresh_with_a_loud_error(tmp_path, caplog):
    directory = tmp_path / "checkpoints"
    bundle, checkpoints = checkpoints_of(directory)
    save_at(bundle, checkpoints, 100)
    truncate(str(directory / "ckpt-100"))
    with caplog.at_level(logging.ERROR, logger="learner"):
        restored, _ = checkpoints_of(directory)
    assert int(restored.train_step.numpy()) == 0
    assert "NO READABLE LEARNER CHECKPOINT" in caplog.text


def test_a_save_on_a_full_disk_fails_softly_and_keeps_the_previous_one(tmp_path, caplog):
    config = LearnerConfig(fc_layer_params=(256, 256))  # ~1 MiB per checkpoint on a 4 MiB filesystem
    with small_filesystem(tmp_path / "disk") as disk:
        bundle, checkpoints = checkpoints_of(disk / "checkpoints", config, settings=config)
        save_at(bundle, checkpoints, 100)
        filler = fill(disk, leave_bytes=64 * 1024)
        bundle.train_step.assign(200)
        with caplog.at_level(logging.ERROR, logger="learner"):
            assert not checkpoints.save(bundle.train_step)
        assert "learner checkpoint at train step 200 failed" in caplog.text and "free in" in caplog.text
        assert not glob.glob(str(disk / "checkpoints" / "ckpt-200*"))  # the partial files are gone
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="learner"):  # no room to compare layouts: a start still resumes
            assert int(checkpoints_of(disk / "checkpoints", config, settings=config)[0].train_step.numpy()) == 100
        assert "restoring without the check" in caplog.text
        filler.unlink()
        assert checkpoints.save(bundle.train_step)  # the next interval succeeds once there is space
        assert int(checkpoints_of(disk / "checkpoints", config)[0].train_step.numpy()) == 200


def test_write_guard_logs_once_per_interval_and_returns_none(tmp_path, caplog):
    guard = WriteGuard("learner")

    def write():
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    with caplog.at_level(logging.ERROR, logger="learner"):
        assert guard("summaries", write) is None
        assert guard("summaries", write) is None
    assert guard.failures == {"summaries": 2}
    assert caplog.text.count("summaries failed") == 1
    assert guard("summaries", lambda: 7) == 7


class _LogFileThatFillsOnce(io.StringIO):
    """A role's stderr on a disk that is full for one write and has room again for the next."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def write(self, text: str) -> int:
        if not self.failed:
            self.failed = True
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(text)


def test_a_log_line_lost_to_a_full_disk_is_dropped_without_a_traceback(monkeypatch):
    stderr = _LogFileThatFillsOnce()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(logging, "raiseExceptions", True)
    handlers, level = logging.root.handlers[:], logging.root.level
    log = setup_logging("learner")
    try:
        log.error("checkpoint failed")
        log.info("checkpoint written")
    finally:
        logging.root.handlers[:], logging.root.level = handlers, level
    assert stderr.failed
    assert "Traceback" not in stderr.getvalue() and "Logging error" not in stderr.getvalue()
    assert "checkpoint written" in stderr.getvalue()
