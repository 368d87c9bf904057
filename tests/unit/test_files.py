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


def traced_syscalls(code: str) -> list[str]:
    """The fsync and rename calls of a Python snippet, from strace (a real trace of the process, in order)."""
    import shutil
    import subprocess
    import sys

    from tests.conftest import REPO

    assert shutil.which("strace"), "strace is needed to watch the process's system calls"
    result = subprocess.run(["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2",
                             sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stderr.splitlines() if "fsync" in line or "rename" in line]


def test_a_durable_write_reaches_the_disk_before_the_rename_and_the_rename_after_it(tmp_path):
    path = tmp_path / "config.json"
    calls = traced_syscalls(f"from dqn.files import atomic_write\n"
                            f"with atomic_write({str(path)!r}) as h: h.write('{{}}')")
    renames = [i for i, call in enumerate(calls) if "rename" in call and str(path) in call]
    assert len(renames) == 1, calls
    assert any("fsync(" in call for call in calls[:renames[0]]), calls  # the temporary file's content
    assert any("fsync(" in call for call in calls[renames[0] + 1:]), calls  # the directory entry
    quick = traced_syscalls(f"from dqn.files import atomic_write\n"
                            f"with atomic_write({str(path)!r}, durable=False) as h: h.write('{{}}')")
    assert not [call for call in quick if "fsync" in call], quick


def test_a_replaced_directory_is_never_missing_for_a_reader(tmp_path):
    """A reader process looks for the export's file as fast as it can while the directory is replaced again and
    again: it must find it every time (two renames leave a moment without it, which such a reader sees)."""
    import subprocess
    import sys
    import time

    from dqn.files import replace_directory

    target = tmp_path / "policy"
    target.mkdir()
    (target / "saved_model.pb").write_text("0")
    reader = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "misses = reads = 0\n"
        "end = time.monotonic() + 3\n"
        "while time.monotonic() < end:\n"
        f"    reads += 1\n"
        f"    misses += not os.path.exists({str(target / 'saved_model.pb')!r})\n"
        "print(misses, reads)")], stdout=subprocess.PIPE, text=True)
    swaps, started = 0, time.monotonic()
    while time.monotonic() - started < 2.5:
        new = tmp_path / "policy.tmp"
        new.mkdir()
        (new / "saved_model.pb").write_text(str(swaps))
        replace_directory(str(new), str(target))
        swaps += 1
    misses, reads = map(int, reader.communicate(timeout=30)[0].split())
    assert swaps > 50 and reads > 10_000, (swaps, reads)
    assert misses == 0, f"{misses} of {reads} reads found no export during {swaps} replacements"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_an_append_cut_short_by_a_full_disk_is_cut_back_off(tmp_path):
    """On a real full file system a line is appended whole or not at all: the file keeps only whole lines."""
    import errno
    import os

    from dqn.files import append_line
    from tests.fs import fill, small_filesystem

    with small_filesystem(tmp_path / "disk", size="1m") as disk:
        path = disk / "evals.jsonl"
        append_line(str(path), '{"train_step": 1}\n')
        fill(disk, leave_bytes=6000)  # less than the next line: part of it fits
        with pytest.raises(OSError) as full:
            append_line(str(path), json.dumps({"train_step": 2, "pad": "x" * 20_000}) + "\n")
        assert full.value.errno == errno.ENOSPC
        assert path.read_text() == '{"train_step": 1}\n'
        os.remove(disk / "filler")
        append_line(str(path), '{"train_step": 3}\n')
        assert path.read_text().splitlines() == ['{"train_step": 1}', '{"train_step": 3}']
