"""The memory limit the kernel enforces on this process: its cgroup's (v2 `memory.max`, v1 `limit_in_bytes`).

A container's limit (Compose `deploy.resources.limits.memory`, a Kubernetes `resources.limits.memory`) is the
cgroup's. The tightest limit of the process's cgroup and every ancestor applies. Inside a container the cgroup
file system is usually mounted at the container's own cgroup while /proc/self/cgroup may name the host's path,
so the ancestors that do not exist under the mount are skipped down to the mount's root.
"""

from __future__ import annotations

import os

#: A v1 limit at or above this is "no limit" (the kernel reports the largest page-aligned int64).
V1_UNLIMITED = 1 << 62


def _ancestors(path: str) -> list[str]:
    """`/a/b` -> [`/a/b`, `/a`, `/`]."""
    found = [path]
    while path not in ("", "/"):
        path = os.path.dirname(path)
        found.append(path)
    return found


def _read_limit(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if text == "max":
        return None
    value = int(text)
    return None if value >= V1_UNLIMITED else value


def memory_limit(proc_cgroup: str = "/proc/self/cgroup", cgroup_root: str = "/sys/fs/cgroup"
                 ) -> tuple[int, str] | None:
    """(bytes, the file that sets it) of the tightest memory limit on this process, or None if there is none."""
    try:
        with open(proc_cgroup, encoding="ascii") as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle if line.count(":") >= 2]
    except OSError:
        return None
    candidates = []
    for _, controllers, path in lines:
        if controllers == "" and os.path.exists(os.path.join(cgroup_root, "cgroup.controllers")):
            base, name = cgroup_root, "memory.max"  # v2: one unified hierarchy
        elif "memory" in controllers.split(","):
            base, name = os.path.join(cgroup_root, "memory"), "memory.limit_in_bytes"  # v1
        else:
            continue
        for directory in _ancestors(path):
            file = os.path.join(base, directory.lstrip("/"), name)
            limit = _read_limit(file)
            if limit is not None:
                candidates.append((limit, file))
    return min(candidates) if candidates else None
