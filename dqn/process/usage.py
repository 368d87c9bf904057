"""What a process costs its machine and what the machine has: CPU seconds, time kept from a core, cores, load.

Read from /proc and the process's cgroup where Linux has them; a figure this machine cannot give is None, never a
guess. "Kept from a core" is the time the process's threads were ready to run but did not: waiting on a run queue
behind other work (the scheduler's own count, /proc/<pid>/task/*/schedstat) or held back by a CPU quota (the
cgroup's throttled time, how a container's CPU limit shows). It tells a starved process from an idle one, which
CPU seconds alone cannot.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import socket
import time

from dqn.process.cgroup import cpu_quota, cpu_throttled_s


@dataclasses.dataclass(frozen=True)
class Usage:
    """Cumulative figures of this process at one moment."""

    clock_s: float  # time.monotonic(): only differences between two readings of one process mean anything
    cpu_s: float
    waited_s: float | None  # runnable but waiting on a run queue (None where Linux does not say)
    throttled_s: float | None  # held back by its cgroup's CPU quota (None without one to read)


@dataclasses.dataclass(frozen=True)
class Machine:
    """The machine a process runs on (all containers on one machine name the same one: `machine_name`)."""

    host: str
    cores: float  # the cores this process may use: its CPU affinity, lowered by a cgroup CPU quota
    load1: float | None  # the 1-minute load average of the machine


def usage() -> Usage:
    """Cumulative CPU seconds and time kept from a core of this process, now."""
    clock_s, cpu_s = time.monotonic(), time.process_time()
    return Usage(clock_s, cpu_s, _run_queue_wait_s(), cpu_throttled_s())


def machine(name: str = "") -> Machine:
    """Name (`name`, else `machine_name()`), usable cores and load of the machine this process runs on."""
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = None
    return Machine((name or machine_name())[:64], _usable_cores(), load1)


#: Files whose presence says this process runs in a container (Docker, Podman); Kubernetes sets the variable.
CONTAINER_MARKS = ("/.dockerenv", "/run/.containerenv")


def machine_name() -> str:
    """The host name; in a container, `machine-` and the kernel's boot id instead.

    Each container has a host name of its own, but all containers on one machine share its kernel's boot id, so the
    verdict counts the cores that one machine's containers take together.
    """
    if any(os.path.exists(mark) for mark in CONTAINER_MARKS) or "KUBERNETES_SERVICE_HOST" in os.environ:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
                return "machine-" + handle.read().strip()[:8]
        except OSError:
            pass
    return socket.gethostname()


def _run_queue_wait_s() -> float | None:
    """Seconds this process's live threads spent runnable but waiting for a core (schedstat's second field)."""
    total, found = 0, False
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path, encoding="ascii") as handle:
                total += int(handle.read().split()[1])
            found = True
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between the listing and the read
    return total / 1e9 if found else None


def _usable_cores() -> float:
    """CPU affinity, lowered by a cgroup CPU quota."""
    cores = float(len(os.sched_getaffinity(0)))
    quota = cpu_quota()
    return cores if quota is None else min(cores, quota)


class Laps:
    """Seconds a loop spends in each of its parts: `lap(name)` adds the time since the previous lap to `name`.

    Two clock reads per part, so a loop of thousands of steps a second can afford it.
    """

    def __init__(self, *names: str):
        self.seconds = dict.fromkeys(names, 0.0)
        self._last = time.perf_counter()

    def start(self) -> None:
        """The next lap counts from now."""
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        """Adds the time since the last `start` or `lap` to `name`."""
        now = time.perf_counter()
        self.seconds[name] += now - self._last
        self._last = now
