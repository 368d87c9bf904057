"""Multi-host: replay server, learner and two actors on four network namespaces joined by a bridge.

Each "host" is a network namespace with one veth on a Linux bridge. Addresses come only from 198.18.0.0/24
(reserved for network benchmark testing), one /28 block per run; there is no default route and no NAT, so no
packet can leave the machine. Every role runs as `ip netns exec NS python -m launcher <command>` with the command
and the DQN_* environment of its service in docker-compose.yml; only what must differ on a test machine is
overridden (see `role_environment`). The roles reach the replay server by its namespace address, never localhost.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dqn.process.health import check
from dqn.process.progress import read_progress
from tests.conftest import REPO, RoleProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

COMPOSE_FILE = REPO / "docker-compose.yml"
TEST_RANGE = ipaddress.ip_network("198.18.0.0/24")
BLOCK_PREFIX = 28  # the /24 in 16 blocks: concurrent runs take different blocks
HOSTS = ("replay-server", "learner", "actor-0", "actor-1")
OUTAGE_S = 20.0
WINDOW_S = 5.0  # the outage is watched in windows this long; the other roles must advance in each one


def ip(*args: str, check_rc: bool = True) -> subprocess.CompletedProcess:
    """Runs `ip ARGS` (bounded); raises with its stderr on failure unless told not to."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check_rc and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def free_block() -> ipaddress.IPv4Network:
    """A /28 of the test range that no interface of this machine uses yet (e.g. another run's bridge)."""
    used = []
    for line in ip("-o", "-4", "addr", "show").stdout.splitlines():
        address = ipaddress.ip_interface(line.split()[3])
        if address.ip in TEST_RANGE:
            used.append(address.network)
    for block in TEST_RANGE.subnets(new_prefix=BLOCK_PREFIX):
        if not any(block.overlaps(network) for network in used):
            return block
    pytest.skip(f"every /{BLOCK_PREFIX} block of {TEST_RANGE} is in use by other runs")


class NamespaceHosts:
    """A bridge and one namespace per host, all named with this test's PID; `close()` removes everything."""

    def __init__(self, hosts: tuple[str, ...]):
        tag = os.getpid()
        self.bridge = f"dqb{tag}"
        self.netns = {host: f"dqn{tag}-{host}" for host in hosts}
        self.veth = {host: f"dqv{tag}x{i}" for i, host in enumerate(hosts)}
        self.block = free_block()
        addresses = list(self.block.hosts())
        self.address = {host: str(addresses[i]) for i, host in enumerate(hosts)}
        self.bridge_address = str(addresses[-1])  # lets the test (root namespace) query the hosts

    def create(self) -> None:
        """Bridge with the test's address, then per host: namespace, veth pair, address, links up."""
        self.close()  # leftovers of an earlier run with the same PID
        prefix = self.block.prefixlen
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.bridge_address}/{prefix}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for host, netns in self.netns.items():
            veth, peer = self.veth[host], f"{self.veth[host]}p"
            ip("netns", "add", netns)
            ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", netns)
            ip("-n", netns, "link", "set", peer, "name", "eth0")
            ip("-n", netns, "addr", "add", f"{self.address[host]}/{prefix}", "dev", "eth0")
            ip("-n", netns, "link", "set", "eth0", "up")
            ip("-n", netns, "link", "set", "lo", "up")
            ip("link", "set", veth, "master", self.bridge)
            ip("link", "set", veth, "up")
            routes = ip("-n", netns, "-4", "route", "show").stdout
            assert "default" not in routes, f"{netns} must have no default route: {routes}"

    def set_link(self, host: str, up: bool) -> None:
        """Plugs (up) or unplugs (down) a host's cable: its veth end on the bridge."""
        ip("link", "set", self.veth[host], "up" if up else "down")

    def close(self) -> None:
        """Deletes namespaces, veths and the bridge; missing ones are fine (idempotent)."""
        for host, netns in self.netns.items():
            ip("netns", "del", netns, check_rc=False)
            ip("link", "del", self.veth[host], check_rc=False)
        ip("link", "del", self.bridge, check_rc=False)


class NetnsRole(RoleProcess):
    """A `python -m launcher <command>` inside a namespace; `ip netns exec` execs, so the PID is the role's."""

    def __init__(self, netns: str, command: list[str], log_path: Path, env: dict[str, str]):
        self.command = command
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "launcher", *command],
                                        stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                        start_new_session=True)
        self.pid = self.process.pid


def compose_service(name: str) -> tuple[list[str], dict[str, str]]:
    """(command, DQN_* environment) of a compose service, as docker compose would give the container."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    service = compose["services"][name]
    environment = {key: str(value) for key, value in service["environment"].items()}
    shared = {key: str(value) for key, value in compose["x-dqn-env"].items()}
    assert shared.items() <= environment.items(), f"{name} must get the whole shared x-dqn-env block"
    return list(service["command"]), environment


def role_environment(environment: dict[str, str], root: Path, replay_address: str, **extra: str) -> dict[str, str]:
    """A service's compose environment with only what must differ on a test machine overridden."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DQN_")}
    for key, value in environment.items():
        if value.startswith("/data/"):  # container volume paths -> the test's tmp dir
            value = str(root / value.removeprefix("/data/"))
        env[key] = value
    env.update({
        "DQN_REPLAY_ADDRESS": replay_address,  # the service name -> the replay host's namespace address
        "DQN_MAX_TRAIN_STEPS": "1000000",  # keep training for the whole test
        "DQN_REPLAY_MIN_SIZE": "200",
        "DQN_WARMUP_STEPS": "100",
        "DQN_NUM_ENVS": "4",
        "DQN_ENVS_PER_ITEM": "4",
        "DQN_SUMMARY_INTERVAL_S": "1",  # actor progress.json every second
        "DQN_SUMMARY_INTERVAL": "20",  # learner progress.json every 20 train steps
        "DQN_CONNECT_TIMEOUT_S": "90",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        **extra,
    })
    return env


@pytest.fixture
def testbed() -> Iterator[NamespaceHosts]:
    """The namespaces and bridge; removed in the finalizer whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces, veths and a bridge")
    if not shutil.which("ip"):
        pytest.skip("needs the `ip` tool (iproute2)")
    bed = NamespaceHosts(HOSTS)
    try:
        try:
            bed.create()
        except RuntimeError as error:
            if "not permitted" in str(error).lower():
                pytest.skip(f"cannot create network namespaces here: {error}")
            raise
        yield bed
    finally:
        bed.close()


def counters(root: Path, actor_ids: dict[str, int]) -> dict[str, int]:
    """Progress of each role from its progress.json: learner train_step, each actor's items."""
    values = {"learner": int(read_progress(str(root / "run" / "learner")).get("train_step", -1))}
    for host, actor_id in actor_ids.items():
        values[host] = int(read_progress(str(root / "run" / f"actor-{actor_id}")).get("items", -1))
    return values


def tcp_connections(netns: str, port: str) -> str:
    """`ss` lines of the TCP connections to or from `port` inside a namespace (for failure messages)."""
    result = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Htn", f"( sport = :{port} or dport = :{port} )"],
                            capture_output=True, text=True, timeout=30)
    return result.stdout.strip() or "(none)"


def replay_inserts(address: str) -> int:
    """Items inserted into the replay table so far, asked from the root namespace over the bridge."""
    import reverb

    info = reverb.Client(address).server_info(timeout=5)
    return int(info["replay"].rate_limiter_info.insert_stats.completed)


def test_roles_on_separate_hosts_survive_an_actor_link_outage(testbed: NamespaceHosts, tmp_path: Path):
    """Roles on 4 hosts train together; one actor's link goes down 20 s: it recovers, the others never stop."""
    _, replay_env = compose_service("replay-server")
    port, health_port = replay_env["DQN_PORT"], replay_env["DQN_HEALTH_PORT"]
    replay_address = f"{testbed.address['replay-server']}:{port}"
    actor_ids = {"actor-0": 0, "actor-1": 1}
    roles: dict[str, NetnsRole] = {}

    def start(host: str, service: str, **extra: str) -> None:
        command, environment = compose_service(service)
        env = role_environment(environment, tmp_path, replay_address, **extra)
        roles[host] = NetnsRole(testbed.netns[host], command, tmp_path / f"{host}.log", env)

    def logs() -> str:
        return "\n".join(f"--- {host} (pid {role.pid}, alive={role.alive()}):\n{role.log()[-3000:]}"
                         for host, role in roles.items())

    def all_alive() -> bool:
        return all(role.alive() for role in roles.values())

    try:
        start("replay-server", "replay-server")
        start("learner", "learner")
        for host, actor_id in actor_ids.items():
            start(host, "actor", DQN_ACTOR_ID=str(actor_id))

        replay_health = f"{testbed.address['replay-server']}:{health_port}"
        wait_until(lambda: not all_alive() or check(replay_health, 2.0) == "SERVING", 90, "replay server SERVING")
        assert all_alive(), logs()
        assert replay_inserts(replay_address) >= 0  # reachable from the root namespace over the bridge
        for host, role in roles.items():  # each recorded PID is the role itself, inside its own namespace
            assert os.stat(f"/proc/{role.pid}/ns/net").st_ino == os.stat(f"/run/netns/{testbed.netns[host]}").st_ino
            assert b"launcher" in Path(f"/proc/{role.pid}/cmdline").read_bytes()
        wait_until(lambda: not all_alive() or min(counters(tmp_path, actor_ids).values()) > 0, 120,
                   "learner training and both actors inserting")
        assert all_alive(), logs()
        for host in ("learner", *actor_ids):
            role_health = f"{testbed.address[host]}:{health_port}"
            assert check(role_health, 3.0) == "SERVING", f"{host} health at {role_health}\n{logs()}"

        # The link of actor-1 goes down; the learner and actor-0 must advance in every window of the outage.
        inserts_before = replay_inserts(replay_address)
        before = counters(tmp_path, actor_ids)
        testbed.set_link("actor-1", up=False)
        down_at = time.monotonic()
        cut_off = check(f"{testbed.address['actor-1']}:{health_port}", 2.0)
        assert cut_off == "UNREACHABLE", f"actor-1 must be cut off while its link is down; health says {cut_off}"
        previous = before
        for window in range(1, int(OUTAGE_S / WINDOW_S) + 1):
            time.sleep(max(0.0, down_at + window * WINDOW_S - time.monotonic()))
            now = counters(tmp_path, actor_ids)
            for host in ("learner", "actor-0"):
                assert now[host] > previous[host], f"{host} stopped during the outage: {previous} -> {now}\n{logs()}"
            previous = now
            assert all_alive(), logs()
        during = previous
        testbed.set_link("actor-1", up=True)
        up_at = time.monotonic()
        inserts_during = replay_inserts(replay_address)
        assert inserts_during > inserts_before, "the replay server must keep receiving actor-0's items"

        # actor-1 recovers (same process): its items advance well past where the outage left them.
        stalled_at = counters(tmp_path, actor_ids)["actor-1"]
        try:
            wait_until(lambda: not all_alive() or counters(tmp_path, actor_ids)["actor-1"] > stalled_at + 500, 60,
                       "actor-1 inserting again after its link came back")
        except AssertionError as error:
            raise AssertionError(
                f"{error}; {counters(tmp_path, actor_ids)}\nactor-1's connections to the replay port:\n"
                f"{tcp_connections(testbed.netns['actor-1'], port)}\nthe replay server's connections:\n"
                f"{tcp_connections(testbed.netns['replay-server'], port)}\n(an ESTAB socket on actor-1 with no "
                "peer socket on the server is a half-open connection the actor never probes)\n" + logs()) from None
        assert all_alive(), logs()
        assert check(f"{testbed.address['actor-1']}:{health_port}", 3.0) == "SERVING"
        recovered = counters(tmp_path, actor_ids)
        recovery_s = time.monotonic() - up_at
        assert recovered["learner"] > during["learner"] and recovered["actor-0"] > during["actor-0"], logs()
        assert replay_inserts(replay_address) > inserts_during
        print(f"multihost: at cut {before}, after {OUTAGE_S:.0f} s outage {during}, recovered {recovered}; "
              f"actor-1 inserting again {recovery_s:.1f} s after link up", flush=True)

        # Clean stop by recorded PID: clients first, then the replay server (final checkpoint); all exit 0.
        for host in ("actor-0", "actor-1", "learner"):
            os.kill(roles[host].pid, signal.SIGTERM)
        codes = {host: roles[host].wait(60) for host in ("actor-0", "actor-1", "learner")}
        os.kill(roles["replay-server"].pid, signal.SIGTERM)
        codes["replay-server"] = roles["replay-server"].wait(60)
        assert codes == dict.fromkeys(codes, 0), f"exit codes {codes}\n{logs()}"
        checkpoint_dir = Path(role_environment(replay_env, tmp_path, replay_address)["DQN_CHECKPOINT_DIR"])
        assert list(checkpoint_dir.glob("*/DONE")), "the replay server writes a final checkpoint on SIGTERM"
    finally:
        for role in roles.values():
            if role.alive():
                os.kill(role.pid, signal.SIGKILL)
                role.process.wait(30)
            role.stop()
