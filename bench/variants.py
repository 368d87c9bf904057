"""Learning comparison of the DQN variants on CartPole-v1: time and env steps to solve with `dqn-service local`.

Each variant is the default configuration plus its switch; the topology is unchanged. Per variant and
seed: solved or not within the budget, seconds from launch, env steps and train steps at the end.

    python bench/variants.py --seeds 1 2 3 --budget-s 120
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from time_to_solve import run_service  # noqa: E402 - sibling bench script

VARIANTS = {
    "plain": [],  # the default agent is DqnAgent
    "double": ["--double-dqn", "true"],
    "n-step=3": ["--n-step-update", "3"],
    "prioritized": ["--prioritized-replay", "true"],  # new items at the actor's |TD error| (Ape-X; auto)
    "prioritized-max": ["--prioritized-replay", "true", "--initial-priority", "max"],  # at max priority (PER)
    "rnn": ["--lstm-size", "64", "--train-sequence-length", "8"],
}


def main() -> None:
    """One JSON row per run, then a summary line per variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget-s", type=float, default=120.0)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; budget {args.budget_s:.0f} s per run", flush=True)
    results: dict[str, list[dict]] = {}
    for seed in args.seeds:
        for name in args.variants:
            run = run_service(seed, args.budget_s, VARIANTS[name])
            results.setdefault(name, []).append(run)
            print(name, json.dumps({k: v for k, v in run.items() if k != "root"}), flush=True)
    for name, runs in results.items():
        solved = [r for r in runs if r["solved"]]
        times = [r["wall_time_s"] if r["solved"] else args.budget_s for r in runs]
        steps = [r["env_steps"] for r in solved]
        print(f"{name:12s} solved {len(solved)}/{len(runs)}; median time {statistics.median(times):.1f} s "
              f"(unsolved = budget); median env steps when solved "
              f"{statistics.median(steps) if steps else float('nan'):.0f}", flush=True)


if __name__ == "__main__":
    main()
