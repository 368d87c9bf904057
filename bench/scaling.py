"""Scaling and cost: aggregate transitions/s with 1, 2 and 4 actor processes; peak RSS per role; bytes per transition.

Setup: one replay server (`--samples-per-insert 0`: no rate limiter) and K real `python -m actor` processes
(CartPole-v1, policy weights published once by this script), no learner: the figure is what actors alone push
into the table. Every process's RSS is sampled every 0.5 s (psutil). Bytes per stored transition: a fresh server
is warmed up with `--warmup-items`, then `--items` more are written through the actor's writer; the server's
RSS growth over those items, divided by their number.

Run: python bench/scaling.py [--actors 1,2,4] [--seconds 15] [--num-envs N] [--items 200000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import fill_replay, inserted, replay_server  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PeakRss:
    """Samples the RSS of named processes every `interval_s` on a thread; keeps the peak per name."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.processes: dict[str, object] = {}
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, name: str, pid: int) -> None:
        """Adds a process to sample."""
        import psutil

        self.processes[name] = psutil.Process(pid)

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(self.interval_s):
            for name, process in list(self.processes.items()):
                try:
                    self.peak[name] = max(self.peak.get(name, 0), process.memory_info().rss)
                except psutil.Error:
                    pass

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def start_actor(address: str, root: str, actor_id: int, num_envs: int | None) -> subprocess.Popen:
    """A real `python -m actor` process with default settings (except warm-up 0: it uses the published weights)."""
    flags = ["--root-dir", root, "--replay-address", address, "--actor-id", str(actor_id), "--warmup-steps", "0",
             "--health-port", "0", "--summary-interval-s", "5"]
    if num_envs:
        flags += ["--num-envs", str(num_envs)]
    log = open(os.path.join(root, f"actor-{actor_id}.log"), "wb")  # noqa: SIM115
    return subprocess.Popen([sys.executable, "-m", "actor", *flags], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def aggregate_rate(num_actors: int, seconds: float, num_envs: int | None) -> tuple[float, dict[str, int], int]:
    """(transitions/s into the table with `num_actors` actors, peak RSS by role, num_envs used)."""
    import reverb

    from dqn.remote.weights_wire import publish_weights
    from dqn.replay_layout.items import ItemShape
    from dqn.resolve import resolved_builder
    from dqn.settings.config import ActorConfig

    root = tempfile.mkdtemp(prefix="bench-scaling-")
    with replay_server("--replay-max-size", "1000000", "--replay-min-size", "16") as (address, server_pid), \
            PeakRss() as rss:
        rss.watch("replay server", server_pid)
        client = reverb.Client(address)
        config = ActorConfig(root_dir=root, replay_address=address)
        publish_weights(client, [v.numpy() for v in resolved_builder(config).agent.policy_variables], train_step=0)
        actors = [start_actor(address, root, i, num_envs) for i in range(num_actors)]
        try:
            for i, actor in enumerate(actors):
                rss.watch(f"actor {i}", actor.pid)
            # Start-up (TensorFlow import, tracing) is not collection: wait until every actor has written items.
            deadline = time.monotonic() + 180
            while True:
                before = inserted(client)
                time.sleep(2.0)
                if inserted(client) - before > 0 and all(
                        os.path.exists(os.path.join(root, f"actor-{i}", "progress.json")) for i in range(num_actors)):
                    break
                if time.monotonic() > deadline or any(actor.poll() is not None for actor in actors):
                    raise RuntimeError(f"actors did not start collecting; see {root}/actor-*.log")
            time.sleep(2.0)  # let the last actor to start reach its steady rate
            before, start = inserted(client), time.perf_counter()
            time.sleep(seconds)
            per_item = ItemShape.from_config(config).envs_per_item
            rate = (inserted(client) - before) * per_item / (time.perf_counter() - start)
        finally:
            for actor in actors:
                actor.terminate()
            for actor in actors:
                actor.wait(60)
    peak = {"replay server": rss.peak.get("replay server", 0),
            "actor (max)": max(rss.peak.get(f"actor {i}", 0) for i in range(num_actors))}
    return rate, peak, num_envs or config.num_envs


def bytes_per_transition(items: int, warmup_items: int) -> tuple[float, int, int]:
    """(server RSS bytes per stored transition, baseline RSS, RSS after) over `items` after a warm-up."""
    import psutil
    import reverb

    from dqn.replay_layout.items import ItemShape
    from dqn.settings.config import CommonConfig

    envs_per_item = ItemShape.from_config(CommonConfig()).envs_per_item  # the server's default layout (fill_replay's)
    with replay_server("--replay-max-size", str(2 * (items + warmup_items)), "--replay-min-size", "16") as (
            address, server_pid):
        server = psutil.Process(server_pid)
        fill_replay(address, warmup_items)
        client = reverb.Client(address)
        time.sleep(1.0)
        base_rss, base_items = server.memory_info().rss, inserted(client)
        fill_replay(address, items)
        time.sleep(1.0)
        stored = (inserted(client) - base_items) * envs_per_item  # transitions
        after_rss = server.memory_info().rss
        return (after_rss - base_rss) / stored, base_rss, after_rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actors", default="1,2,4", help="comma-separated actor counts, one row each")
    parser.add_argument("--seconds", type=float, default=15.0, help="measuring window per row")
    parser.add_argument("--num-envs", type=int, default=0, help="envs per actor; 0 = the config default")
    parser.add_argument("--items", type=int, default=200_000,
                        help="transitions for the bytes-per-item figure (0: none)")
    parser.add_argument("--warmup-items", type=int, default=20_000)
    args = parser.parse_args()

    mib = 1024 * 1024
    print(f"{os.cpu_count()} CPUs; replay server --samples-per-insert 0, no learner; actors = `python -m actor` "
          f"with default settings, warm-up 0, weights published once; {args.seconds:.0f} s window per row")
    print(f"{'actors':>6} {'num_envs':>8} {'trans/s total':>13} {'trans/s per actor':>17} {'vs 1 actor':>10} "
          f"{'peak RSS server':>15} {'peak RSS actor':>14}")
    single = None
    for count in (int(n) for n in args.actors.split(",")):
        rate, peak, num_envs = aggregate_rate(count, args.seconds, args.num_envs or None)
        single = single or rate
        print(f"{count:>6} {num_envs:>8} {rate:>13,.0f} {rate / count:>17,.0f} {rate / single:>9.2f}x "
              f"{peak['replay server'] / mib:>11,.0f} MiB {peak['actor (max)'] / mib:>10,.0f} MiB", flush=True)
    if not args.items:
        return
    per_item, base, after = bytes_per_transition(args.items, args.warmup_items)
    print(f"replay server: {per_item:,.0f} bytes per stored CartPole transition (RSS {base / mib:,.0f} MiB after "
          f"{args.warmup_items:,} transitions -> {after / mib:,.0f} MiB after {args.items:,} more, actor writer)")


if __name__ == "__main__":
    main()
