"""A three-node Docker Swarm on one machine for the live swarm test: one dockerd per node, each in its own network
namespace (and hostname), with its own data root, exec root and socket, started by deploy/engine/setup-docker-engine.sh.

The nodes hang on one bridge with addresses from 198.18.72.0/24 (the benchmark range 198.18.0.0/15; no default
route, no NAT: no packet leaves the machine); swarm's overlay networks take their subnets from 198.18.160.0/19.
Inside each node the engine's own bridges use the script's 198.18.128.0/24 and 198.19.0.0/16, which no other
namespace sees. Every name and path is fixed, so that a run first removes what a crashed run left behind.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.deploy.engine import REPO, SCRIPT

ROOT = Path("/var/tmp/dqn-swarm-live")
NODES = ("dqn-node1", "dqn-node2", "dqn-node3")
BRIDGE = "dqnswbr0"
PREFIX = "198.18.72"  # node i has PREFIX.i, the bridge (the test's own address) PREFIX.254
OVERLAY_POOL = "198.18.160.0/19"
STACK = "dqn"
STACK_FILES = ("docker-compose.yml", "deploy/swarm.yml", "deploy/compose.signed.yml", "tests/deploy/swarm.live.yml")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`ip ARGS`, bounded; raises with its stderr on failure unless told not to."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


class Node:
    """One swarm node: a network namespace with one veth on the bridge, and a dockerd inside it."""

    def __init__(self, index: int, name: str):
        self.name = name
        self.netns = name
        self.veth = f"dqnswv{index}"
        self.address = f"{PREFIX}.{index}"
        self.root = ROOT / name
        self.socket = self.root / "docker.sock"
        self.options = ["--data-root", str(self.root / "data"), "--exec-root", str(self.root / "run"),
                        "--socket", str(self.socket), "--plugins-dir", str(ROOT / "config" / "cli-plugins"),
                        "--python", sys.executable]
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}", "DOCKER_CONFIG": str(ROOT / "config")}

    def script(self, command: str, timeout_s: float = 180) -> None:
        """setup-docker-engine.sh COMMAND for this node, inside its network namespace and under its own hostname."""
        shell = f'hostname {self.name} && exec "$0" "$@"'
        argv = ["nsenter", f"--net=/run/netns/{self.netns}", "unshare", "--uts", "sh", "-c", shell, str(SCRIPT),
                command, *self.options]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=self.env)
        if result.returncode:
            raise RuntimeError(f"{self.name}: setup-docker-engine.sh {command} failed ({result.returncode}):\n"
                               f"{result.stdout}\n{result.stderr}")

    def docker(self, *args: str, timeout_s: float = 120, check: bool = True,
               stdin: str | None = None) -> subprocess.CompletedProcess:
        """`docker ARGS` against this node's engine (from the repository root)."""
        result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s, env=self.env,
                                cwd=REPO, input=stdin)
        if check and result.returncode:
            raise AssertionError(f"{self.name}: docker {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def answers(self) -> bool:
        """Whether this node's engine answers on its socket."""
        return self.docker("version", "--format", "{{.Server.Version}}", timeout_s=10, check=False).returncode == 0

    def processes(self) -> list[int]:
        """PIDs of the node: everything in its network namespace (dockerd, containerd, shims) and their descendants
        (the containers' processes, which live in namespaces of their own)."""
        import psutil

        listed = ip("netns", "pids", self.netns, check=False).stdout.split()
        pids = set()
        for pid in map(int, listed):
            try:
                process = psutil.Process(pid)
                pids.add(pid)
                pids.update(child.pid for child in process.children(recursive=True))
            except psutil.Error:
                pass
        return sorted(pids)

    def power_off(self) -> None:
        """Takes the node down hard, as a power cut would: SIGKILL to its engine, containerd and every container."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while self.processes():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: processes left after SIGKILL: {self.processes()}")
            time.sleep(0.2)

    def volume_dir(self, volume: str) -> Path:
        """Where this node's engine keeps a local volume's data (readable from the host)."""
        return self.root / "data" / "volumes" / volume / "_data"


def _purge(node: Node) -> None:
    """Powers a node off and deletes its engine's roots; what fails here shows in `Swarm.leftovers()`."""
    try:
        node.power_off()
        node.script("purge")
    except (AssertionError, RuntimeError, subprocess.TimeoutExpired):
        pass  # the sweep in Swarm.close() and leftovers() report what is still there


class Swarm:
    """The bridge, three namespaced engines and the swarm joining them; `close()` removes all of it."""

    def __init__(self):
        self.nodes = [Node(i, name) for i, name in enumerate(NODES, start=1)]
        self.manager = self.nodes[0]
        #: a worker, so that the control plane stays up while the node with the state is down
        self.state = self.nodes[1]
        self._names: dict[str, str] = {}

    def create(self) -> None:
        """Bridge and namespaces, then one engine per node (leftovers of an earlier run removed first)."""
        self.close()
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{PREFIX}.254/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        for node in self.nodes:
            ip("netns", "add", node.netns)
            ip("link", "add", node.veth, "type", "veth", "peer", "name", f"{node.veth}p")
            ip("link", "set", f"{node.veth}p", "netns", node.netns)
            ip("-n", node.netns, "link", "set", f"{node.veth}p", "name", "eth0")
            ip("-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
            ip("-n", node.netns, "link", "set", "eth0", "up")
            ip("-n", node.netns, "link", "set", "lo", "up")
            ip("link", "set", node.veth, "master", BRIDGE)
            ip("link", "set", node.veth, "up")
            assert "default" not in ip("-n", node.netns, "route", "show").stdout
        for node in self.nodes:
            node.script("start")

    def init(self) -> None:
        """Swarm on node 1 (the manager); nodes 2 and 3 join as workers; node 2 gets the label dqn.state=true
        (deploy/swarm.yml pins the replay server, learner, evaluator and TensorBoard there, with their volumes)."""
        self.manager.docker("swarm", "init", "--advertise-addr", self.manager.address, "--listen-addr",
                            f"{self.manager.address}:2377", "--default-addr-pool", OVERLAY_POOL,
                            "--default-addr-pool-mask-length", "24")
        token = self.manager.docker("swarm", "join-token", "-q", "worker").stdout.strip()
        for node in self.nodes[1:]:
            node.docker("swarm", "join", "--token", token, "--advertise-addr", node.address,
                        f"{self.manager.address}:2377")
        self.manager.docker("node", "update", "--label-add", "dqn.state=true", self.state.name)

    def load_image(self, archive: Path) -> None:
        """`docker load` of the saved service image on every node at once (no registry)."""
        loads = [subprocess.Popen(["docker", "load", "-q", "-i", str(archive)], env=node.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for node in self.nodes]
        for node, load in zip(self.nodes, loads, strict=True):
            out, _ = load.communicate(timeout=600)
            if load.returncode:
                raise AssertionError(f"{node.name}: docker load failed: {out}")

    def deploy(self) -> None:
        """`docker stack deploy` of docker-compose.yml with the swarm and signed overrides and the test's small
        budgets; the shared key is a fresh file that the manager's CLI uploads as a Swarm secret."""
        key = ROOT / "dqn_shared_key"
        key.write_text(secrets.token_hex(32) + "\n")
        key.chmod(0o400)
        self.manager.env["SHARED_KEY_PATH"] = str(key)
        files = [arg for f in STACK_FILES for arg in ("-c", f)]
        self.manager.docker("stack", "deploy", "--detach=true", "--resolve-image", "never", *files, STACK,
                            timeout_s=180)

    def node_of(self, node_id: str) -> Node:
        """The Node whose swarm id this is."""
        if node_id not in self._names:
            hostname = self.manager.docker("node", "inspect", node_id, "--format", "{{.Description.Hostname}}")
            self._names[node_id] = hostname.stdout.strip()
        return next(node for node in self.nodes if node.name == self._names[node_id])

    def node_status(self) -> dict[str, str]:
        """Node name -> its status as the manager sees it (ready, down)."""
        out = self.manager.docker("node", "ls", "--format", "{{.Hostname}} {{.Status}}").stdout
        return dict(line.split()[:2] for line in out.splitlines())

    def tasks(self, service: str) -> list[dict]:
        """The running tasks of a stack service: slot, node name, container id and health (from its node)."""
        return self.tasks_of([service])[service]

    def tasks_of(self, services: list[str]) -> dict[str, list[dict]]:
        """Service -> its running tasks, as `tasks` gives them. The health of all of them comes from one
        `docker inspect` per node rather than one per container: the test polls this while ten roles share two
        cores, and every docker call it saves is CPU the roles get back."""
        found: dict[str, list[dict]] = {}
        containers: dict[str, list[str]] = {}
        for service in services:
            ids = self.manager.docker("service", "ps", f"{STACK}_{service}", "-q", "--no-trunc", "--filter",
                                      "desired-state=running").stdout.split()
            found[service] = []
            for task in json.loads(self.manager.docker("inspect", *ids).stdout) if ids else []:
                status = task["Status"]
                if status["State"] != "running":
                    continue
                node = self.node_of(task["NodeID"])
                container = status.get("ContainerStatus", {}).get("ContainerID", "")
                found[service].append({"slot": task.get("Slot"), "node": node.name, "container": container})
                if container:
                    containers.setdefault(node.name, []).append(container)
        health = {}
        for node in self.nodes:
            if node.name in containers:
                # A container the node no longer has is left out of the output (and of `health`), not the others.
                out = node.docker("inspect", "--format", "{{.Id}} {{.State.Health.Status}}", *containers[node.name],
                                  check=False).stdout
                health.update(line.split(maxsplit=1) for line in out.splitlines() if len(line.split()) == 2)
        for tasks in found.values():
            for task in tasks:
                task["health"] = health.get(task["container"], "")
        return found

    def close(self) -> None:
        """Stops every engine hard, unmounts and deletes its roots, then the namespaces, veths and bridge.

        The nodes are purged side by side: each stops its own processes and deletes a data root of its own (a copy
        of the image's layers per node), so nothing orders them and waiting for one before the next only adds up."""
        live = [node for node in self.nodes if Path(f"/run/netns/{node.netns}").exists()]
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            list(pool.map(_purge, live))
        for node in self.nodes:
            ip("netns", "del", node.netns, check=False)
            ip("link", "del", node.veth, check=False)
        ip("link", "del", BRIDGE, check=False)
        for mount in sorted((line.split()[1] for line in open("/proc/mounts")
                             if line.split()[1].startswith(f"{ROOT}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=30)
        shutil.rmtree(ROOT, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """What close() should have removed but did not: namespaces, links, mounts, the root."""
        found = [f"netns {n.netns}" for n in self.nodes if Path(f"/run/netns/{n.netns}").exists()]
        links = ip("-o", "link", "show").stdout
        found += [f"link {name}" for name in (BRIDGE, *(n.veth for n in self.nodes)) if f" {name}:" in links
                  or f" {name}@" in links]
        found += [f"mount {line.split()[1]}" for line in open("/proc/mounts") if line.split()[1].startswith(str(ROOT))]
        if ROOT.exists():
            found.append(f"dir {ROOT}")
        return found
