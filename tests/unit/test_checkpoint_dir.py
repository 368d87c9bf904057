"""The replay checkpoint directory is the server's alone: what counts as Reverb's own, what is refused."""

import pytest

from dqn.settings.config import LocalConfig, ReplayServerConfig
from dqn.settings.loading import ConfigError
from replay_server.checkpoint_dir import ForeignCheckpointEntries, check_checkpoint_dir, foreign_entries


def test_reverb_checkpoints_complete_or_partial_are_the_servers_own(tmp_path):
    for name, files in (("2026-11-27T21:02:42.07420828+00:00", ("DONE", "chunks.tfrecord", "items.tfrecord",
                                                                 "tables.tfrecord")),
                        ("2026-11-27T21:03:00+01:00", ("tables.tfrecord",)),  # a write cut short
                        ("2026-11-27T21:04:00Z", ())):
        (tmp_path / name).mkdir()
        for file in files:
            (tmp_path / name / file).write_bytes(b"")
    assert foreign_entries(str(tmp_path)) == []
    check_checkpoint_dir(str(tmp_path))
    assert foreign_entries(str(tmp_path / "missing")) == []  # created at start


def test_anything_else_is_refused_by_name(tmp_path):
    (tmp_path / "2026-11-27T21:02:42+00:00").mkdir()
    (tmp_path / "2026-11-27T21:02:42+00:00" / "notes.txt").write_text("x")  # a file Reverb did not write
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "2026-11-27T21:05:00+00:00").write_text("a file, not a checkpoint folder")
    (tmp_path / "quarantine").mkdir()
    assert foreign_entries(str(tmp_path)) == ["2026-11-27T21:02:42+00:00", "2026-11-27T21:05:00+00:00",
                                              "lost+found", "quarantine"]
    with pytest.raises(ForeignCheckpointEntries) as refused:
        check_checkpoint_dir(str(tmp_path))
    assert refused.value.exit_code == 2
    assert str(refused.value).startswith(f"--checkpoint-dir / DQN_CHECKPOINT_DIR {tmp_path} holds entries")


@pytest.mark.parametrize("config_class", [ReplayServerConfig, LocalConfig])
def test_the_run_root_is_never_the_checkpoint_dir_or_inside_it(tmp_path, config_class):
    for checkpoint_dir in (tmp_path, tmp_path.parent):
        with pytest.raises(ConfigError, match="--checkpoint-dir / DQN_CHECKPOINT_DIR: .* holds the run root"):
            config_class(root_dir=str(tmp_path), checkpoint_dir=str(checkpoint_dir)).check()
    config_class(root_dir=str(tmp_path), checkpoint_dir=str(tmp_path / "replay_checkpoints")).check()
    config_class(root_dir=str(tmp_path)).check()
