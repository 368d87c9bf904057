"""Capacity: how many actors one replay server can take, measured against light clients over network namespaces.

One real replay server (`dqn-service replay-server`, the env's real tables and item signature, no rate limiter)
runs in a network namespace of its own; N light client processes, spread round-robin over `--client-hosts` more
namespaces on one bridge (198.18.73.0/24: the benchmark range, no route off the machine), each do one thing as
fast as the server lets them:
- `insert`: write real replay items (blocks of envs from a real env's time steps, through the actor's writer),
  re-sending the same few steps, so no env or policy costs client CPU;
- `pull`: download the published weights from the `variables` table (what an actor does after each publication),
  the env's real network: CartPole's MLP or the Breakout preset's conv net (6.7 MB).
For each N the bench reports the total rate as the server counts it (items inserted, weight items sampled) and the
server's CPU time over the window, so that the figure per server core (items or pulls per CPU-second of the server
process) holds whatever the clients cost.

Run (root, for the namespaces): python bench/capacity.py [--clients 1,2,4,8] [--seconds 10] [--client-hosts 4]
  [--env cartpole,breakout] [--mode insert,pull]
Without root, `--loopback` runs the same server and clients on this machine's loopback (no network figures).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "198.18.73"  # server .1, client hosts .2.., the bridge .254
BRIDGE = "dqncapbr0"
ENVS = {"cartpole": [], "breakout": ["--preset", "breakout"]}
STEPS = 32  # real steps an insert client replays


def ip(*args: str, check: bool = True) -> None:
    """`ip ARGS`, bounded."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")


class Hosts:
    """A bridge and one namespace per host (`dqncap-<i>`, address PREFIX.<i+1>); `close()` removes them."""

    def __init__(self, count: int):
        self.names = [f"dqncap-{i}" for i in range(count)]
        self.server_ports = (8000, 8001)  # replay and health: the server has its namespace to itself

    def address(self, i: int) -> str:
        """The address of host i."""
        return f"{PREFIX}.{i + 1}"

    def create(self) -> None:
        """Bridge, namespaces, veths, addresses (leftovers of a crashed run removed first)."""
        self.close()
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{PREFIX}.254/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        for i, name in enumerate(self.names):
            veth = f"dqncapv{i}"
            ip("netns", "add", name)
            ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
            ip("link", "set", f"{veth}p", "netns", name)
            ip("-n", name, "link", "set", f"{veth}p", "name", "eth0")
            ip("-n", name, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            ip("-n", name, "link", "set", "eth0", "up")
            ip("-n", name, "link", "set", "lo", "up")
            ip("link", "set", veth, "master", BRIDGE)
            ip("link", "set", veth, "up")

    def close(self) -> None:
        """Deletes namespaces, veths and the bridge (missing ones are fine)."""
        for i, name in enumerate(self.names):
            ip("netns", "del", name, check=False)
            ip("link", "del", f"dqncapv{i}", check=False)
        ip("link", "del", BRIDGE, check=False)

    def popen(self, i: int, argv: list[str], log) -> subprocess.Popen:
        """A process in host i's network namespace."""
        return subprocess.Popen(["nsenter", f"--net=/run/netns/{self.names[i]}", *argv], cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT)


class Loopback:
    """Hosts' stand-in without root: the server and every client on this machine's loopback, on free ports.

    The clients share the server's network stack, so the figures are not a network's; the code paths are the same.
    """

    def __init__(self):
        import portpicker

        self.server_ports = (portpicker.pick_unused_port(), portpicker.pick_unused_port())

    def address(self, i: int) -> str:
        """Every host is this machine."""
        return "127.0.0.1"

    def create(self) -> None:
        """Nothing to build."""

    def close(self) -> None:
        """Nothing to remove."""

    def popen(self, i: int, argv: list[str], log) -> subprocess.Popen:
        """A process on this machine."""
        return subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def client_config(env: str):
    """The common config a client and the server share for `env` (the preset's values for Breakout)."""
    from dqn.settings import loading
    from dqn.settings.config import ALL_CONFIG_CLASSES, LearnerConfig

    flags = {"preset": "breakout"} if env == "breakout" else {}
    return loading.resolve(LearnerConfig, environ={}, flags=flags,
                           known_names=loading.known_field_names(ALL_CONFIG_CLASSES))


def wait_for_go(out: str) -> None:
    """Says this client is ready (`<out>.ready`), then waits for the coordinator's `go` file and its start time."""
    open(f"{out}.ready", "w").close()
    go = os.path.join(os.path.dirname(out), "go")
    deadline = time.time() + 600
    while not os.path.exists(go):
        if time.time() > deadline:
            raise SystemExit("no go from the coordinator within 600 s")
        time.sleep(0.05)
    time.sleep(max(0.0, float(open(go).read()) - time.time()))


def run_client(mode: str, env: str, address: str, seconds: float, out: str) -> None:
    """One light client: prepares, waits for the go, then inserts or pulls for `seconds`; writes its count."""
    import numpy as np
    import reverb

    config = client_config(env)
    client = reverb.Client(address)
    count, nbytes = 0, 0
    if mode == "insert":
        from dqn.replay_layout.items import ItemShape
        from dqn.resolve import resolved_builder

        builder = resolved_builder(config)
        envs = ItemShape.from_config(config).envs_per_item  # one block of envs: one item per append
        vector = builder.make_envs(envs, seed=os.getpid())
        rng = np.random.default_rng(os.getpid())
        num_actions = int(vector.action_spec().maximum) + 1
        # STEPS real consecutive steps (random actions), replayed in a loop: real observations, so the writer's
        # compression sees real frames, and no env or policy costs CPU inside the window.
        steps = [vector.reset()]
        actions = []
        for _ in range(STEPS):
            actions.append(rng.integers(0, num_actions, size=envs, dtype=np.int64))
            steps.append(vector.step(actions[-1]))
        vector.close()
        writer = builder.make_writer(client, envs)  # the actor's writer, spec checks included
        wait_for_go(out)
        deadline = time.time() + seconds
        while time.time() < deadline:
            for i in range(STEPS):
                writer.append(steps[i], actions[i], steps[i + 1])
                writer.wait_for_server(max_pending_per_stream=8, timeout_ms=30_000)
        count = writer.items_created  # items created by the deadline (the window's rate; a few still in flight)
        writer.close(timeout_ms=30_000)
    else:
        from dqn.remote.weights_wire import sample_weights

        sample_weights(client)  # the first call sets up the stream
        wait_for_go(out)
        deadline = time.time() + seconds
        while time.time() < deadline:
            weights = sample_weights(client)
            count += 1
            nbytes += sum(v.nbytes for v in weights.variables)
    with open(out, "w") as f:
        json.dump({"count": count, "bytes": nbytes}, f)


def completed(client, mode: str) -> int:
    """The server's own count: items inserted into the replay table, or samples of the variables table."""
    from dqn.replay_layout.items import REPLAY_TABLE, VARIABLES_TABLE

    info = client.server_info(timeout=30)
    if mode == "insert":
        return info[REPLAY_TABLE].rate_limiter_info.insert_stats.completed
    return info[VARIABLES_TABLE].rate_limiter_info.sample_stats.completed


#: Every client process started, killed at exit if still running.
CLIENTS: list[subprocess.Popen] = []


def measure(hosts: Hosts, mode: str, env: str, counts: list[int], seconds: float, client_hosts: int) -> list[dict]:
    """Rows of (clients, total rate, server CPU-s per s, rate per server core) for one env and mode."""
    import psutil
    import reverb

    from dqn.process.health import check
    from dqn.remote.weights_wire import publish_weights
    from dqn.replay_layout.items import ItemShape
    from dqn.resolve import resolved_builder

    root = tempfile.mkdtemp(prefix="bench-capacity-")
    port, health_port = hosts.server_ports
    address = f"{hosts.address(0)}:{port}"
    server_log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115
    server = hosts.popen(0, [sys.executable, "-m", "launcher", "replay-server", *ENVS[env], "--root-dir", root,
                             "--port", str(port), "--health-port", str(health_port), "--checkpoint-interval-s", "0",
                             "--samples-per-insert", "0", "--replay-max-size", "20000"], server_log)
    rows = []
    try:
        deadline = time.monotonic() + 180
        while check(f"{hosts.address(0)}:{health_port}", 1.0) != "SERVING":
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replay server did not start; see {root}/server.log")
            time.sleep(0.5)
        config = client_config(env)
        variables = [v.numpy() for v in resolved_builder(config).agent.policy_variables]
        server_client = reverb.Client(address)
        publish_weights(server_client, variables, train_step=1)
        weight_bytes = sum(v.nbytes for v in variables)
        envs = ItemShape.from_config(config).envs_per_item
        process = psutil.Process(server.pid)  # nsenter execs the server: this is its process
        for n in counts:
            run_dir = tempfile.mkdtemp(prefix=f"{mode}-{n}-", dir=root)
            outs = [os.path.join(run_dir, f"client-{i}.json") for i in range(n)]
            clients = [hosts.popen(1 + i % client_hosts, [sys.executable, os.path.abspath(__file__), "--client", mode,
                                                          "--env", env, "--address", address, "--seconds",
                                                          str(seconds), "--out", out], server_log)
                       for i, out in enumerate(outs)]
            CLIENTS.extend(clients)
            deadline = time.monotonic() + 600  # every client imported and prepared before the window opens
            while not all(os.path.exists(f"{out}.ready") for out in outs):
                if time.monotonic() > deadline or any(c.poll() is not None for c in clients):
                    raise RuntimeError(f"clients did not get ready; see {root}/server.log")
                time.sleep(0.2)
            start_at = time.time() + 1.0
            with open(os.path.join(run_dir, "go.part"), "w") as f:
                f.write(repr(start_at))
            os.replace(os.path.join(run_dir, "go.part"), os.path.join(run_dir, "go"))
            time.sleep(max(0.0, start_at - time.time()))
            done_before = completed(server_client, mode)
            cpu_before, wall_before = sum(process.cpu_times()[:2]), time.monotonic()
            time.sleep(seconds)
            cpu = sum(process.cpu_times()[:2]) - cpu_before
            done = completed(server_client, mode) - done_before  # what the server accepted or served in the window
            wall = time.monotonic() - wall_before
            for client in clients:
                if client.wait(120 + seconds):
                    raise RuntimeError(f"a client failed; see {root}/server.log")
            total = done / wall
            rows.append({"env": env, "mode": mode, "clients": n, "rate": total, "server_cores": cpu / wall,
                         "per_core": total / max(cpu / wall, 1e-9),
                         "mb_per_s": total * weight_bytes / 1e6 if mode == "pull" else 0.0,
                         "unit": f"items of {envs} transitions" if mode == "insert" else
                         f"pulls of {weight_bytes / 1e6:.2f} MB"})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        server.terminate()
        server.wait(60)
        server_log.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="1,2,4,8", help="comma-separated client counts, one row each")
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring window per row")
    parser.add_argument("--client-hosts", type=int, default=4, help="namespaces the clients are spread over")
    parser.add_argument("--env", default="cartpole,breakout", help="cartpole and/or breakout")
    parser.add_argument("--mode", default="insert,pull", help="insert and/or pull")
    parser.add_argument("--loopback", action="store_true",
                        help="no namespaces (no root needed): server and clients on loopback; checks the code paths, "
                             "its figures are not a network's")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        run_client(args.client, args.env, args.address, args.seconds, args.out)
        return
    if os.geteuid() != 0 and not args.loopback:
        sys.exit("bench/capacity.py builds network namespaces: run it as root (or with --loopback)")
    counts = [int(n) for n in args.clients.split(",")]
    hosts = Loopback() if args.loopback else Hosts(1 + args.client_hosts)
    rows = []
    # TensorFlow's and gRPC's handlers swallow SIGINT: make both signals end the run through the cleanup below.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: sys.exit("stopped by a signal"))
    try:
        hosts.create()
        for env in args.env.split(","):
            for mode in args.mode.split(","):
                rows += measure(hosts, mode, env, counts, args.seconds, args.client_hosts)
    finally:
        for client in CLIENTS:
            if client.poll() is None:
                client.kill()
                client.wait(30)
        hosts.close()
    where = ("server and clients on loopback" if args.loopback
             else f"one replay server in its own namespace; clients over {args.client_hosts} namespaces")
    print(f"\n{os.cpu_count()} CPUs; {where}; {args.seconds:.0f} s per row")
    print(f"{'env':>9} {'mode':>6} {'clients':>7} {'rate/s':>9} {'MB/s':>7} {'server cores':>12} "
          f"{'per server core':>15}  unit")
    for r in rows:
        mb = f"{r['mb_per_s']:>7,.1f}" if r["mode"] == "pull" else f"{'-':>7}"
        print(f"{r['env']:>9} {r['mode']:>6} {r['clients']:>7} {r['rate']:>9,.1f} {mb} "
              f"{r['server_cores']:>12.2f} {r['per_core']:>15,.1f}  {r['unit']}")


if __name__ == "__main__":
    main()
