"""Nothing of a `dqn-service local` run is reachable from another host.

A second "host" is a network namespace joined to this one by a veth pair, with addresses only from 198.18.74.0/24
(the benchmark range: no route off the machine). A real `local` run starts on this host; the other host then
tries to connect to every TCP port that any process of the run listens on (the replay server's Reverb and health
ports, TensorBoard), at this host's veth address. Needs root (namespaces, veth); fails, never skips, without it.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import subprocess
import sys
import urllib.request

import psutil
import pytest

from dqn.process.progress import read_progress
from tests.conftest import REPO, free_port, wait_until
from tests.helpers import FAST, LEARNER_FAST

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TEST_RANGE = ipaddress.ip_network("198.18.74.0/24")

SCAN = """
import json, socket, sys
host, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
seen = {}
for port in ports:
    try:
        socket.create_connection((host, port), timeout=2).close()
        seen[port] = "open"
    except ConnectionRefusedError:
        seen[port] = "refused"
    except OSError as error:
        seen[port] = type(error).__name__
print(json.dumps(seen))
"""


def ip(*args: str) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if result.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


class OtherHost:
    """A network namespace on a veth pair with this host: this side `.host_address`, the other `.address`."""

    def __init__(self):
        tag = os.getpid()
        self.netns, self.veth, self.peer = f"dqscan{tag}", f"dqh{tag}", f"dqp{tag}"
        used = [ipaddress.ip_interface(line.split()[3]).network
                for line in ip("-o", "-4", "addr", "show").splitlines()]
        block = next(b for b in TEST_RANGE.subnets(new_prefix=30) if not any(b.overlaps(u) for u in used))
        self.host_address, self.address = (str(a) for a in block.hosts())
        self.prefix = block.prefixlen

    def __enter__(self) -> OtherHost:
        assert os.geteuid() == 0, "this test builds network namespaces and a veth pair: it needs root"
        self.__exit__()
        ip("netns", "add", self.netns)
        ip("link", "add", self.veth, "type", "veth", "peer", "name", self.peer)
        ip("link", "set", self.peer, "netns", self.netns)
        ip("addr", "add", f"{self.host_address}/{self.prefix}", "dev", self.veth)
        ip("link", "set", self.veth, "up")
        ip("-n", self.netns, "addr", "add", f"{self.address}/{self.prefix}", "dev", self.peer)
        ip("-n", self.netns, "link", "set", self.peer, "up")
        ip("-n", self.netns, "link", "set", "lo", "up")
        return self

    def __exit__(self, *_) -> None:
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=30)

    def scan(self, ports: set[int]) -> dict[int, str]:
        """From the other host, a connect attempt to each port of this host: open, refused, or the error."""
        result = subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", SCAN, self.host_address,
                                 *map(str, sorted(ports))], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return {int(port): seen for port, seen in json.loads(result.stdout).items()}


def listening_ports(pid: int) -> set[int]:
    """TCP ports process `pid` listens on, read in its own network namespace (/proc/PID/net/tcp{,6})."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[len("socket:["):-1] for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}", encoding="ascii") as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def run_ports(launcher: subprocess.Popen) -> dict[str, set[int]]:
    """Process name -> the TCP ports it listens on, for the launcher and everything it started."""
    ports = {}
    for process in [psutil.Process(launcher.pid), *psutil.Process(launcher.pid).children(recursive=True)]:
        try:
            found = listening_ports(process.pid)
            if found:
                ports[f"{process.name()}[{process.pid}]"] = found
        except psutil.NoSuchProcess:
            continue
    return ports


def start_local(root, tensorboard_port: int, wrap: tuple[str, ...] = ()) -> subprocess.Popen:
    command = [*wrap, sys.executable, "-m", "launcher", "local", "--root-dir", str(root), *FAST, *LEARNER_FAST,
               "--num-actors", "1", "--num-envs", "4", "--max-train-steps", "100000", "--tensorboard", "true",
               "--tensorboard-port", str(tensorboard_port),
               "--target-return", "1e9"]  # CartPole can be solved within seconds: the run must outlast the checks
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def stop(launcher: subprocess.Popen) -> str:
    launcher.terminate()
    try:
        output, _ = launcher.communicate(timeout=240)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return output


def serving_from_the_host(root, launcher, tensorboard_port: int) -> None:
    """The run works: the learner trains on what the actor writes, TensorBoard answers on this host's 127.0.0.1."""
    wait_until(lambda: launcher.poll() is not None or read_progress(str(root / "learner")).get("train_step", 0) > 0,
               240, "the learner's first train steps")
    assert launcher.poll() is None, launcher.communicate()[0]

    def tensorboard_answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{tensorboard_port}/", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(tensorboard_answers, 120, "TensorBoard on 127.0.0.1")


def test_no_port_of_a_local_run_is_reachable_from_another_host(tmp_path):
    with OtherHost() as other:
        # The scan sees an open port where there is one: a listener of this host on every interface.
        control = socket.create_server(("", 0))
        assert other.scan({control.getsockname()[1]}) == {control.getsockname()[1]: "open"}
        control.close()

        root, tensorboard_port = tmp_path / "run", free_port()
        launcher = start_local(root, tensorboard_port)
        try:
            serving_from_the_host(root, launcher, tensorboard_port)
            ports = run_ports(launcher)
            replay = next(ports for name, ports in ports.items() if name.startswith("dqn-replay"))
            assert len(replay) >= 2, ports  # Reverb and the health service
            assert tensorboard_port in set().union(*ports.values()), ports
            seen = other.scan(set().union(*ports.values()))
            print(f"\nports of the run: {ports}\nseen from {other.address}: {seen}")
            assert all(state != "open" for state in seen.values()), (ports, seen)
            assert read_progress(str(root / "learner")).get("train_step", 0) > 0
        finally:
            output = stop(launcher)
    assert "the roles run in a network namespace of their own" in output, output
    assert "WARNING" not in output


def test_without_namespaces_local_warns_and_names_the_exposed_port(tmp_path):
    """Where the kernel grants no namespace (here: a user namespace whose namespace limits are 0), the run works
    on the host's network and its first lines say which port any host can reach; the health port stays local."""
    no_namespaces = ("unshare", "--user", "--map-root-user", "sh", "-c",
                     "echo 0 > /proc/sys/user/max_net_namespaces && echo 0 > /proc/sys/user/max_user_namespaces "
                     '&& exec "$@"', "sh")
    with OtherHost() as other:
        root, tensorboard_port = tmp_path / "run", free_port()
        launcher = start_local(root, tensorboard_port, wrap=no_namespaces)
        try:
            serving_from_the_host(root, launcher, tensorboard_port)
            ports = run_ports(launcher)
            seen = other.scan(set().union(*ports.values()))
            print(f"\nports of the run: {ports}\nseen from {other.address}: {seen}")
        finally:
            output = stop(launcher)
    warning = re.search(r"WARNING: the roles run on this host's network \(unshare: No space left on device\): the "
                        r"replay server's Reverb port (\d+) listens on every interface", output)
    assert warning, output
    assert [port for port, state in seen.items() if state == "open"] == [int(warning.group(1))], (ports, seen)
