"""Soak (RELIABILITY L1): the whole system for N minutes, one actor killed (-9) and restarted periodically.

actor-1 is the one killed; actor-0 runs the whole soak, so an actor's steady-state memory trend shows too.

Prints kills vs restarts, train steps before/after each kill, and an RSS trend per role: the least-squares slope
in MiB/min over the second half of the run, and the growth of each process while it lives (a slope fitted within
each process life, after its first minute of samples: a killed actor restarts every ~85 s at the defaults, so a
slope across its lives would hide a process that grows).

Run: python bench/soak.py [--minutes 10] [--kill-every-s 60]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import portpicker  # noqa: E402
import psutil  # noqa: E402

from dqn.process.progress import read_progress  # noqa: E402

FLAGS = ["--replay-max-size", "50000", "--samples-per-insert", "16"]


def start(role: str, root: str, *flags: str) -> subprocess.Popen:
    """A role process logging to <root>/logs/<role>.log."""
    os.makedirs(os.path.join(root, "logs"), exist_ok=True)
    log = open(os.path.join(root, "logs", f"{role}-{time.time():.0f}.log"), "wb")  # noqa: SIM115
    return subprocess.Popen([sys.executable, "-m", "launcher", role.split("#")[0], "--root-dir", root, *FLAGS, *flags],
                            stdout=log, stderr=subprocess.STDOUT)


def wait_serving(server: subprocess.Popen, health_port: int, timeout_s: float = 120.0) -> None:
    """Returns once the replay server's health says SERVING: the clients start then, not after a guessed pause."""
    from dqn.process.health import check

    deadline = time.monotonic() + timeout_s
    while check(f"localhost:{health_port}", 1.0) != "SERVING":
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the replay server did not serve within {timeout_s:.0f} s (exit code {server.poll()})")
        time.sleep(0.2)


def slope_mib_per_min(samples: list[tuple[float, int, float]]) -> float:
    """Least-squares RSS slope over the second half of the run (across restarts)."""
    half = samples[len(samples) // 2:]
    if len(half) < 3:
        return float("nan")
    t = np.array([s[0] for s in half]) / 60
    rss = np.array([s[2] for s in half]) / 2**20
    return float(np.polyfit(t, rss, 1)[0])


def within_life_slope(samples: list[tuple[float, int, float]], warmup_s: float = 60.0) -> tuple[float, int]:
    """(MiB/min, lives used): one slope fitted to every process life at once, each life with its own level.

    Only samples after a life's first `warmup_s` and in the second half of the run count.
    """
    half_time = samples[-1][0] / 2
    lives: dict[int, list[tuple[float, float]]] = {}
    for t, pid, rss in samples:
        lives.setdefault(pid, []).append((t, rss))
    numerator = denominator = 0.0
    used = 0
    for life in lives.values():
        kept = [(t, rss) for t, rss in life if t - life[0][0] >= warmup_s and t >= half_time]
        if len(kept) < 3:
            continue
        t = np.array([k[0] for k in kept]) / 60
        rss = np.array([k[1] for k in kept]) / 2**20
        numerator += float(np.sum((t - t.mean()) * (rss - rss.mean())))
        denominator += float(np.sum((t - t.mean()) ** 2))
        used += 1
    return (numerator / denominator if denominator else float("nan")), used


def rss_near(samples: list[tuple[float, int, float]], fraction: float) -> float:
    """Median RSS (MiB) of the samples within 30 s of `fraction` of the run (smooths sampling noise)."""
    at = samples[-1][0] * fraction
    near = [value for t, _, value in samples if abs(t - at) <= 30] or [samples[-1][2]]
    return float(np.median(near)) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kill-every-s", type=float, default=60.0)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="soak-")
    port, health = portpicker.pick_unused_port(), portpicker.pick_unused_port()
    address = ["--replay-address", f"localhost:{port}"]
    roles = {"replay-server": start("replay-server", root, "--port", str(port), "--health-port", str(health),
                                    "--checkpoint-interval-s", "120")}
    wait_serving(roles["replay-server"], health)
    roles["learner"] = start("learner", root, *address, "--max-train-steps", "100000000", "--export-interval", "0")
    for i in range(2):
        roles[f"actor-{i}"] = start("actor", root, *address, "--actor-id", str(i))
    roles["evaluator"] = start("evaluator", root, *address, "--eval-interval", "2000")

    started = time.monotonic()
    rss: dict[str, list[tuple[float, int, float]]] = {name: [] for name in roles}  # (t, pid, bytes)
    kills, restarts, events = 0, 0, []
    next_kill = started + args.kill_every_s
    while time.monotonic() - started < args.minutes * 60:
        now = time.monotonic() - started
        for name, process in roles.items():
            if process.poll() is None:
                rss[name].append((now, process.pid, psutil.Process(process.pid).memory_info().rss))
        crashed = [n for n, p in roles.items() if p.poll() is not None]
        if crashed:
            print(f"CRASHED: {crashed}")
            break
        if time.monotonic() >= next_kill:
            victim = "actor-1"
            before = read_progress(os.path.join(root, "learner")).get("train_step", 0)
            roles[victim].kill()
            roles[victim].wait(30)
            kills += 1
            time.sleep(5)
            roles[victim] = start("actor", root, *address, "--actor-id", victim.split("-")[1])
            restarts += 1
            time.sleep(20)
            after = read_progress(os.path.join(root, "learner")).get("train_step", 0)
            events.append((round(now), victim, before, after))
            next_kill = time.monotonic() + args.kill_every_s
        time.sleep(2)

    final_step = read_progress(os.path.join(root, "learner")).get("train_step", 0)
    for process in roles.values():
        process.terminate()
    codes = {name: process.wait(120) for name, process in roles.items()}
    print(f"soak: {args.minutes:.0f} min, run dir {root}")
    print(f"kills={kills} restarts={restarts} final_train_step={final_step} exit codes on SIGTERM: {codes}")
    print("kill events (t_s, victim, learner step before kill, 20 s after restart):")
    for event in events:
        print(f"  {event}")
    print(f"{'role':<14} {'rss start MiB':>14} {'at 1/2':>8} {'at 3/4':>8} {'rss end MiB':>12} "
          f"{'slope MiB/min (2nd half)':>26} {'within lives MiB/min (lives)':>30}")
    for name, samples in rss.items():
        if samples:
            slope, lives = within_life_slope(samples)
            print(f"{name:<14} {samples[0][2] / 2**20:>14.0f} {rss_near(samples, 0.5):>8.1f} "
                  f"{rss_near(samples, 0.75):>8.1f} {samples[-1][2] / 2**20:>12.0f} "
                  f"{slope_mib_per_min(samples):>26.2f} {slope:>24.2f} ({lives})")
    with open(os.path.join(root, "rss.json"), "w", encoding="utf-8") as handle:
        json.dump(rss, handle)
    print(f"RSS samples (seconds, pid, bytes) per role: {os.path.join(root, 'rss.json')}")


if __name__ == "__main__":
    main()
