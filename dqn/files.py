"""Files that other processes read while they are rewritten: replaced whole, never seen half-written.

Progress files, resolved configs and the evaluator's best policy are read by other processes (`local`, `status`,
a restarted role) at any moment. Each is written to a temporary file beside it and renamed over it, which is
atomic on one file system: a reader sees the old file or the new one. Standard library only, so every layer
may import it (settings included).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import IO


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w") -> Iterator[IO]:
    """A handle to write `path`'s new content into; it replaces `path` only if the block ends without an error.

    `mode` is "w" (text, UTF-8) or "wb". The temporary file is named per process and thread, so two writers of
    one path never write into the same temporary file; a failed write removes it and leaves `path` as it was.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes whole files: mode 'w' or 'wb', not {mode!r}")
    tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    try:
        with open(tmp, mode, encoding="utf-8" if mode == "w" else None) as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
