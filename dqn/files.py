"""Files that other processes read while they are rewritten: replaced whole, never seen half-written.

Progress files, resolved configs and the evaluator's best policy are read by other processes (`local`, `status`,
a restarted role) at any moment. Each is written to a temporary file beside it and renamed over it, which is
atomic on one file system: a reader sees the old file or the new one. A file that is the only copy of what it
holds (a run's resolved settings, the best weights) is also flushed to the disk before the rename, and the rename
after it, so a power cut leaves the old file or the new one, never an empty one. Standard library only, so every
layer may import it (settings included).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import threading
from collections.abc import Iterator
from typing import IO


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", durable: bool = True) -> Iterator[IO]:
    """A handle to write `path`'s new content into; it replaces `path` only if the block ends without an error.

    `mode` is "w" (text, UTF-8) or "wb". The temporary file is named per process and thread, so two writers of
    one path never write into the same temporary file; a failed write removes it and leaves `path` as it was.
    `durable`: fsync the file before the rename and its directory after it; leave it off only for a file that is
    rewritten every few seconds and holds nothing another file does not (a progress file).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes whole files: mode 'w' or 'wb', not {mode!r}")
    tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    try:
        with open(tmp, mode, encoding="utf-8" if mode == "w" else None) as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        if durable:
            sync_directory(os.path.dirname(path) or ".")
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def append_line(path: str, line: str) -> None:
    """Appends `line` (with its newline) whole, or nothing: a write cut short (a full disk) is cut back off.

    A reader of the file (the launcher follows the evaluator's results) would otherwise find half a line, and
    the next line appended to it. One writer per file; flushed to the disk, as the file is the only record.
    """
    data = line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, f"{path}: short write")
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def sync_directory(directory: str) -> None:
    """Flushes a directory's entries (a rename into it) to the disk."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: renameat2's flag that swaps two existing paths in one step, and the "current directory" of its *at arguments.
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _exchange(first: str, second: str) -> None:
    """Swaps two existing paths atomically (Linux renameat2 RENAME_EXCHANGE): no moment where either is missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), first, None, second)


def replace_directory(new: str, target: str) -> None:
    """Puts the finished directory `new` in the place of `target`, which readers never find missing.

    The files are flushed to the disk first. An existing `target` is swapped with `new` in one step and the old
    content then removed; a file system that cannot swap (EINVAL, or a libc without renameat2) gets two renames,
    with a moment between them where `target` is missing.
    """
    for folder, _, files in os.walk(new):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                os.fsync(handle.fileno())
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.exists(target):
        os.replace(new, target)
    else:
        try:
            _exchange(new, target)
        except (OSError, AttributeError) as error:
            if isinstance(error, OSError) and error.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            old = f"{target}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(new, target)
            new = old
        shutil.rmtree(new, ignore_errors=True)
    sync_directory(parent)
