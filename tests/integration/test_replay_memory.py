"""The replay memory check reads this machine's real cgroup: a replay server in a child cgroup with the Compose
file's 2 GiB limit refuses a table that would not fit, and starts one that does. Needs root (it makes the cgroup);
fails, never skips, without it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from dqn.process.cgroup import memory_limit
from tests.conftest import REPO, free_port, health_status, wait_until

pytestmark = pytest.mark.integration

LIMIT = 2 << 30  # docker-compose.yml's replay server: deploy.resources.limits.memory 2g


def own_memory_cgroup() -> tuple[str, str]:
    """(directory of this process's memory cgroup, its limit file's name): v2 if mounted so, else v1."""
    lines = [line.rstrip("\n").split(":", 2) for line in open("/proc/self/cgroup", encoding="ascii")]
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        path = next(p for _, controllers, p in lines if controllers == "")
        return f"/sys/fs/cgroup{path.rstrip('/')}", "memory.max"
    path = next(p for _, controllers, p in lines if "memory" in controllers.split(","))
    return f"/sys/fs/cgroup/memory{path.rstrip('/')}", "memory.limit_in_bytes"


def test_this_machines_limit_is_what_the_kernel_files_say():
    directory, name = own_memory_cgroup()
    files = []
    while directory.startswith("/sys/fs/cgroup"):
        if os.path.exists(f"{directory}/{name}"):
            files.append(open(f"{directory}/{name}", encoding="ascii").read().strip())
        directory = os.path.dirname(directory)
    limits = [int(v) for v in files if v != "max" and int(v) < 1 << 62]
    found = memory_limit()
    print(f"\nmemory limit files from this process's cgroup up: {files}; memory_limit() = {found}")
    assert (found[0] if found else None) == (min(limits) if limits else None)


@pytest.fixture
def limited_cgroup():
    """A child of this process's memory cgroup with a 2 GiB limit; removed afterwards."""
    assert os.geteuid() == 0, "this test makes a cgroup: it needs root"
    parent, name = own_memory_cgroup()
    path = f"{parent}/dqn-test-{uuid.uuid4().hex[:8]}"
    os.mkdir(path)
    try:
        with open(f"{path}/{name}", "w", encoding="ascii") as handle:
            handle.write(str(LIMIT))
        yield path, f"{path}/{name}"
    finally:
        os.rmdir(path)


def replay_server_in(cgroup: str, root, *flags: str) -> subprocess.Popen:
    command = ["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", sys.executable, "-m", "launcher",
               "replay-server", "--root-dir", str(root), *flags]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def test_a_replay_that_would_not_fit_the_real_limit_is_refused_and_one_that_fits_starts(limited_cgroup, tmp_path):
    cgroup, limit_file = limited_cgroup
    refused = replay_server_in(cgroup, tmp_path / "big", "--replay-max-size", "10000000", "--port", str(free_port()))
    output, _ = refused.communicate(timeout=120)
    assert refused.returncode == 2, output
    assert f"its memory limit is 2.0 GiB ({limit_file})" in output, output
    assert "lower --replay-max-size / DQN_REPLAY_MAX_SIZE to " in output and "Traceback" not in output

    health_port = free_port()
    fits = replay_server_in(cgroup, tmp_path / "small", "--port", str(free_port()), "--health-port", str(health_port))
    try:
        wait_until(lambda: fits.poll() is not None or health_status(health_port) == "SERVING", 120, "SERVING")
        assert fits.poll() is None, fits.communicate()[0]
    finally:
        fits.terminate()
        output, _ = fits.communicate(timeout=120)
    assert fits.returncode == 0 and "memory limit" not in output, output
