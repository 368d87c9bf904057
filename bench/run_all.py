"""Runs every benchmark in bench/ one after another (never in parallel: they share the cores) and prints its output.

Run: python bench/run_all.py [--skip NAME ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
#: In this order; a missing script is reported and skipped. `capacity` builds network namespaces: run as root.
BENCHES = ("learner_throughput", "actor_throughput", "scaling", "capacity", "learning_sim", "time_to_solve", "breakout")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip", nargs="*", default=[], help="bench names not to run")
    args = parser.parse_args()
    failed = []
    for name in BENCHES:
        path = os.path.join(HERE, f"{name}.py")
        if name in args.skip:
            print(f"== {name}: skipped (--skip)", flush=True)
            continue
        if not os.path.exists(path):
            print(f"== {name}: bench/{name}.py does not exist; skipped", flush=True)
            continue
        print(f"== {name}: python bench/{name}.py", flush=True)
        start = time.monotonic()
        code = subprocess.call([sys.executable, path], cwd=os.path.dirname(HERE))
        print(f"== {name}: exit {code} after {time.monotonic() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
