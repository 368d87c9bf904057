"""A real small filesystem for disk-full tests: a tmpfs mounted for the test (needs root, as CI runs)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_filesystem(path: Path, size: str = "4m") -> Iterator[Path]:
    """Mounts a tmpfs of `size` at `path` and unmounts it afterwards; fails (never skips) if mounting is refused."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"cannot mount a tmpfs (the disk-full tests need root): {mounted.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, leave_bytes: int = 0) -> Path:
    """Fills the filesystem of `path` with one file, leaving about `leave_bytes` free; returns the file."""
    filler = path / "filler"
    free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
    # The process under test keeps writing while we fill, so the space can run out before `free` bytes are
    # written: a full disk is the outcome we want, not an error.
    try:
        with open(filler, "ab") as handle:
            handle.write(b"\0" * max(0, free - leave_bytes))
    except OSError as error:
        if error.errno != errno.ENOSPC or leave_bytes:
            raise
    return filler
