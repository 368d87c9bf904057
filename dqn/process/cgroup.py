"""The limits the kernel enforces on this process through its cgroup: memory and CPU.

Memory: v2 `memory.max`, v1 `limit_in_bytes`. CPU: the quota in cores (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
`cpu.cfs_period_us`) and the seconds it has held the process back (`cpu.stat`: v2 `throttled_usec`, v1
`throttled_time`), which tell a process starved by its CPU limit from one that is idle.

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


def _cgroup_dirs(controller: str, proc_cgroup: str, cgroup_root: str) -> list[str]:
    """The cgroup directory of this process for `controller` and its ancestors, nearest first, where they exist."""
    try:
        with open(proc_cgroup, encoding="ascii") as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle if line.count(":") >= 2]
    except OSError:
        return []
    dirs = []
    for _, controllers, path in lines:
        if controllers == "" and os.path.exists(os.path.join(cgroup_root, "cgroup.controllers")):
            base = cgroup_root  # v2: one unified hierarchy
        elif controller in controllers.split(","):
            base = os.path.join(cgroup_root, controllers)  # v1: mounted under the joined controller names
            if not os.path.isdir(base):
                base = os.path.join(cgroup_root, controller)
        else:
            continue
        dirs += [os.path.join(base, directory.lstrip("/")) for directory in _ancestors(path)]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _read_ints(path: str) -> list[int] | None:
    try:
        with open(path, encoding="ascii") as handle:
            return [int(word) if word != "max" else -1 for word in handle.read().split()]
    except (OSError, ValueError):
        return None


def cpu_quota(proc_cgroup: str = "/proc/self/cgroup", cgroup_root: str = "/sys/fs/cgroup") -> float | None:
    """The tightest CPU quota on this process in cores (quota / period), or None where there is none."""
    quotas = []
    for directory in _cgroup_dirs("cpu", proc_cgroup, cgroup_root):
        v2 = _read_ints(os.path.join(directory, "cpu.max"))
        if v2 is not None and len(v2) == 2 and v2[0] > 0 < v2[1]:
            quotas.append(v2[0] / v2[1])
        quota = _read_ints(os.path.join(directory, "cpu.cfs_quota_us"))
        period = _read_ints(os.path.join(directory, "cpu.cfs_period_us"))
        if quota and period and quota[0] > 0 < period[0]:
            quotas.append(quota[0] / period[0])
    return min(quotas) if quotas else None


def cpu_throttled_s(proc_cgroup: str = "/proc/self/cgroup", cgroup_root: str = "/sys/fs/cgroup") -> float | None:
    """Seconds this process's own cgroup has been held back by a CPU quota, or None where no `cpu.stat` says."""
    for directory in _cgroup_dirs("cpu", proc_cgroup, cgroup_root):
        try:
            with open(os.path.join(directory, "cpu.stat"), encoding="ascii") as handle:
                stat = dict(line.split() for line in handle if len(line.split()) == 2)
        except (OSError, ValueError):
            continue
        if "throttled_usec" in stat:
            return int(stat["throttled_usec"]) / 1e6
        if "throttled_time" in stat:
            return int(stat["throttled_time"]) / 1e9
    return None
