"""What the bottleneck-verdict scenarios inject, and how they wait for the verdict.

- `CpuQuota`: a process under a CPU quota in a cgroup of its own (how a container's CPU limit starves it).
- `FarHost`: a network namespace joined to this one by a veth pair, addresses only in 198.19.0.0/16 (part of the
  range reserved for network benchmark tests), no route anywhere else; `slow(...)` shapes its egress with tc.
- `VerdictWatcher`: reads the replay server's verdict every 2 s and records every verdict it saw.

Every injection needs root (cgroups, namespaces, tc): without it a scenario fails naming what it needs.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from pathlib import Path

#: The addresses a far host may use: a /30 per test process inside the range reserved for benchmark tests.
BENCH_RANGE = ipaddress.ip_network("198.19.0.0/16")


def needs_root(what: str) -> None:
    """Fails (never skips) a scenario that cannot inject its fault here."""
    assert os.geteuid() == 0, f"this scenario needs root to {what}; run the suite as root"


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    """A bounded command; raises with its stderr on failure unless told not to."""
    result = subprocess.run(list(command), capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result


class CpuQuota:
    """A cgroup named for this test process with a CPU quota; `add(pid)` moves a process into it, `close()` out."""

    def __init__(self, cores: float):
        needs_root("put a process under a CPU quota")
        v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
        base = Path("/sys/fs/cgroup") if v2 else Path("/sys/fs/cgroup/cpu")
        assert (base / "cgroup.procs").exists(), f"no cgroup cpu controller at {base}"
        self.root = base
        self.path = base / f"dqn-verdict-{os.getpid()}"
        self.path.mkdir(exist_ok=True)
        period = 100_000
        if v2:
            (self.path / "cpu.max").write_text(f"{int(cores * period)} {period}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(period))
            (self.path / "cpu.cfs_quota_us").write_text(str(int(cores * period)))
        self.pids: list[int] = []

    def add(self, pid: int) -> None:
        """Moves process `pid` (all its threads) under the quota."""
        (self.path / "cgroup.procs").write_text(str(pid))
        self.pids.append(pid)

    def close(self) -> None:
        """Moves the processes back to the root group and removes the cgroup."""
        for pid in self.pids:
            try:
                (self.root / "cgroup.procs").write_text(str(pid))
            except OSError:
                pass  # it has exited
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


#: The far host's machine name in its role reports.
FAR_MACHINE = "far-host"


class FarHost:
    """A network namespace on a veth pair of its own: `address` there, `near_address` here, nothing routed beyond."""

    def __init__(self):
        needs_root("create a network namespace and shape its link")
        tag = os.getpid() % 16_384
        block = list(BENCH_RANGE.subnets(new_prefix=30))[tag]
        self.near_address, self.address = (str(a) for a in list(block.hosts())[:2])
        self.netns, self.veth = f"dqnv{os.getpid()}", f"dqvv{os.getpid()}"
        self.close()
        run("ip", "netns", "add", self.netns)
        run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", f"{self.veth}p")
        run("ip", "link", "set", f"{self.veth}p", "netns", self.netns)
        run("ip", "addr", "add", f"{self.near_address}/30", "dev", self.veth)
        run("ip", "link", "set", self.veth, "up")
        run("ip", "-n", self.netns, "addr", "add", f"{self.address}/30", "dev", f"{self.veth}p")
        run("ip", "-n", self.netns, "link", "set", f"{self.veth}p", "up")
        run("ip", "-n", self.netns, "link", "set", "lo", "up")
        routes = run("ip", "-n", self.netns, "-4", "route", "show").stdout
        assert "default" not in routes, f"{self.netns} must have no default route: {routes}"

    def prefix(self) -> list[str]:
        """The command prefix that runs a command in the namespace (it execs: the PID is the command's)."""
        return ["ip", "netns", "exec", self.netns]

    @staticmethod
    def role_flags() -> list[str]:
        """What a role there passes: the machine name a second host would have, so the verdict counts the cores
        its roles take apart from this one's (they still run on this machine's cores, and slow the roles here as
        work outside the run would)."""
        return ["--machine-name", FAR_MACHINE]

    def slow(self, rate: str) -> None:
        """Shapes the far host's egress (its writes to the replay server) to `rate` with a token bucket (tbf).

        tbf rather than netem: this kernel has no netem; a rate limit is what makes a link slow for bulk writes.
        """
        run("ip", "netns", "exec", self.netns, "tc", "qdisc", "replace", "dev", f"{self.veth}p", "root", "tbf",
            "rate", rate, "burst", "4kb", "latency", "200ms")

    def slow_inbound(self, rate: str) -> None:
        """Shapes what reaches the far host (weights pulled from the replay server) at this end of its own veth."""
        run("tc", "qdisc", "replace", "dev", self.veth, "root", "tbf", "rate", rate, "burst", "32kb", "latency",
            "400ms")

    def unslow(self) -> None:
        """Takes the shaping off both ends again."""
        run("ip", "netns", "exec", self.netns, "tc", "qdisc", "del", "dev", f"{self.veth}p", "root", check=False)
        run("tc", "qdisc", "del", "dev", self.veth, "root", check=False)

    def close(self) -> None:
        """Removes the namespace and the veth pair (missing ones are fine)."""
        run("ip", "netns", "del", self.netns, check=False)
        run("ip", "link", "del", self.veth, check=False)


class VerdictWatcher:
    """The verdicts of the replay server at `address` (or, for a `local` run whose ports are out of the test's
    reach, the copy in its run directory `root_dir`), read every `interval_s`, all kept in `seen`."""

    def __init__(self, address: str | None = None, interval_s: float = 2.0, root_dir: Path | None = None):
        import reverb

        self.client = reverb.Client(address) if address else None
        self.root_dir = root_dir
        self.interval_s = interval_s
        self.seen: list[tuple[float, dict]] = []

    def read(self) -> dict | None:
        """The current verdict (recorded), or None."""
        from dqn.remote.role_reports import fetch_verdict
        from launcher.verdict_line import read_verdict

        verdict = fetch_verdict(self.client, 5.0) if self.client else read_verdict(str(self.root_dir))
        if verdict is not None:
            self.seen.append((time.monotonic(), verdict))
        return verdict

    def wait_for(self, part: str, within_s: float, what: str, reads: int = 1) -> tuple[float, dict]:
        """(seconds it took, the verdict) once `reads` reads in a row name `part`, the first within `within_s`.

        Fails naming every verdict it saw.
        """
        started, streak = time.monotonic(), []
        while time.monotonic() - started < within_s or streak:
            verdict = self.read()
            streak = streak + [time.monotonic()] if verdict is not None and verdict["part"] == part else []
            if len(streak) >= reads:
                return streak[0] - started, verdict
            time.sleep(self.interval_s)
        lines = "\n".join(f"  +{t - started:4.0f} s {v['line']}" for t, v in self.seen if t >= started)
        raise AssertionError(f"{what}: no verdict named {part!r} within {within_s:.0f} s; the verdicts were:\n{lines}")

    def wait_until_judging(self, within_s: float) -> float:
        """Seconds until the verdict is past warming up (the roles report and train)."""
        started = time.monotonic()
        while time.monotonic() - started < within_s:
            verdict = self.read()
            if verdict is not None and verdict["part"] != "warming up":
                return time.monotonic() - started
            time.sleep(self.interval_s)
        raise AssertionError(f"the roles did not get past warming up within {within_s:.0f} s: "
                             f"{self.seen[-1][1]['line'] if self.seen else 'no verdict at all'}")


def record_observation(name: str, verdict: dict) -> None:
    """With VERDICT_RECORD_DIR=DIR, keeps the verdict's observation as DIR/<name>.json (the unit tests' fixtures)."""
    import json

    directory = os.environ.get("VERDICT_RECORD_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / f"{name}.json").write_text(json.dumps(
            {"part": verdict["part"], "line": verdict["line"], "observation": verdict["observation"]}, indent=1) + "\n")
