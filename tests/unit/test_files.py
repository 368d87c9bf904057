"""atomic_write: a file is replaced whole or not at all."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dqn.files import atomic_write


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "progress.json"
    path.write_text('{"old": 1}')
    with atomic_write(str(path)) as handle:
        json.dump({"new": 2}, handle)
        assert json.loads(path.read_text()) == {"old": 1}  # readers see the old file until the block ends
    assert json.loads(path.read_text()) == {"new": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary_file(tmp_path):
    path = tmp_path / "best_policy.json"
    path.write_text('{"train_step": 1}')
    with pytest.raises(RuntimeError), atomic_write(str(path)) as handle:
        handle.write('{"train_st')
        raise RuntimeError("disk full")
    assert json.loads(path.read_text()) == {"train_step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["best_policy.json"]


def test_binary_writes_take_numpy_archives(tmp_path):
    path = tmp_path / "best_weights.npz"
    with atomic_write(str(path), "wb") as handle:
        np.savez(handle, count=1, variable_0=np.arange(3))
    with np.load(path) as saved:
        assert int(saved["count"]) == 1 and saved["variable_0"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(str(path), "a"):
            pass
