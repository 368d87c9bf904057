"""Where the CPU goes in a whole `dqn-service local` run: CPU seconds per role, and the run's rates.

Run: python bench/role_cpu.py --seconds 300 -- --preset breakout --seed 1

Launches `dqn-service local` with the flags after `--` (a fresh --root-dir, --max-wall-time-s SECONDS), finds each
role's process id in its log (`<root>/logs/<role>.log`, "role[pid]"), and reads every role's CPU time (user +
system, its threads included) when the run starts to train and again just before the budget ends. Prints, per
role, the share of one core it used over that window and of the box's cores; then train steps/s and env steps/s
over the same window from the learner's and actors' progress files.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PID_IN_LOG = re.compile(r"^\S+ [\w-]+\[(\d+)\]")


def role_pids(root: str) -> dict[str, int]:
    """Role name -> process id, from the first line of each role's log that names it."""
    pids = {}
    for path in glob.glob(os.path.join(root, "logs", "*.log")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if match := PID_IN_LOG.match(line):
                    pids[os.path.basename(path)[:-4]] = int(match.group(1))
                    break
    return pids


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """Role -> user + system CPU seconds so far (roles that have exited are left out)."""
    import psutil

    seconds = {}
    for role, pid in pids.items():
        try:
            times = psutil.Process(pid).cpu_times()
            seconds[role] = times.user + times.system
        except psutil.Error:
            pass
    return seconds


def progress(root: str) -> tuple[int, int]:
    """(learner train step, actors' env steps summed) from the progress files; 0 where there is none yet."""
    def read(path: str) -> dict:
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {}

    train = int(read(os.path.join(root, "learner", "progress.json")).get("train_step", 0))
    env = sum(int(read(path).get("env_steps", 0)) for path in glob.glob(os.path.join(root, "actor-*", "progress.json")))
    return train, env


def main() -> None:
    """Runs one `local` run and prints the CPU share of each role over its training window."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="the run's wall-clock budget")
    parser.add_argument("--tail-s", type=float, default=15.0, help="stop measuring this long before the budget")
    parser.add_argument("flags", nargs="*", help="dqn-service local flags (after --)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="role-cpu-")
    command = [sys.executable, "-m", "launcher", "local", "--root-dir", root, "--max-wall-time-s",
               str(args.seconds), *args.flags]
    started = time.monotonic()
    run = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = None
    while run.poll() is None and time.monotonic() - started < args.seconds - args.tail_s:
        time.sleep(2.0)
        if first is None and progress(root)[0] > 0:  # training started: every role is up
            first = (time.monotonic(), cpu_seconds(role_pids(root)), progress(root))
    last = (time.monotonic(), cpu_seconds(role_pids(root)), progress(root))
    output = run.communicate(timeout=args.seconds + 300)[0]
    if first is None:
        sys.exit(f"the run never trained; its output ends:\n{output[-2000:]}")
    window = last[0] - first[0]
    cores = os.cpu_count() or 1
    print(f"root {root}; window {window:.0f} s from the first train step; {cores} cores")
    print("| role | CPU s | share of one core | share of the box |\n|---|---|---|---|")
    total = 0.0
    for role in sorted(last[1]):
        used = last[1][role] - first[1].get(role, 0.0)
        total += used
        print(f"| {role} | {used:.1f} | {used / window:.0%} | {used / window / cores:.0%} |")
    print(f"| all roles | {total:.1f} | {total / window:.0%} | {total / window / cores:.0%} |")
    train = (last[2][0] - first[2][0]) / window
    env = (last[2][1] - first[2][1]) / window
    print(f"train steps/s {train:.1f}; env steps/s {env:.1f}")


if __name__ == "__main__":
    main()
