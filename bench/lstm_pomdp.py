"""LSTM vs feed-forward Q-network at equal budget: `dqn-service local --env-id E --seed S [--lstm-size 32]`.

By default on the partially observed CartPole of `bench/pomdp_envs.py` (no velocities), where one observation
does not tell the policy where the pole is heading; `--env-id CartPole-v1` checks that the RNN still solves the
fully observed env. For each run: time to the env's reward_threshold (from launch), best greedy 10-episode
average of trained weights within the budget, SGD steps/s (train steps / wall time). Prints a table and, per
seed, the LSTM's best return over the feed-forward one's.

    python bench/lstm_pomdp.py --seeds 1 2 3 --budget-s 300
    python bench/lstm_pomdp.py --env-id CartPole-v1 --variants lstm --seeds 1 2 3 --budget-s 300
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.learning_suite import best_by  # noqa: E402
from bench.time_to_solve import run_service  # noqa: E402

POMDP_ENV_ID = "bench.pomdp_envs:CartPoleNoVelocity-v0"
VARIANTS = {"lstm": ["--lstm-size", "32"], "feed-forward": []}


def run_one(env_id: str, variant: str, seed: int, budget_s: float) -> dict:
    """One service run of a variant with nothing else set, summarised."""
    run = run_service(seed, budget_s, ["--env-id", env_id, *VARIANTS[variant]])
    row = {"env_id": env_id, "variant": variant, "seed": seed, "solved": run["solved"],
           "time_to_threshold_s": run["wall_time_s"] if run["solved"] else None,
           "train_steps": run.get("train_steps"), "env_steps": run.get("env_steps"),
           "sgd_steps_per_s": round(run["train_steps"] / run["wall_time_s"], 1) if run.get("train_steps") else None,
           "root": run.get("root"), "error": run.get("error")}
    if "started_epoch" in run:
        best = best_by(run["root"], run["started_epoch"], (int(budget_s),))[f"best_by_{int(budget_s)}s"]
        row["best_return"] = None if best is None else round(best, 1)
    return row


def main() -> None:
    """Runs every variant x seed one after another and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default=POMDP_ENV_ID)
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget-s", type=float, default=300.0, help="wall-clock budget per run, s")
    args = parser.parse_args()
    rows = []
    for seed in args.seeds:
        for variant in args.variants:
            rows.append(run_one(args.env_id, variant, seed, args.budget_s))
            print(json.dumps(rows[-1]), flush=True)
    columns = ["variant", "seed", "time_to_threshold_s", "best_return", "sgd_steps_per_s", "train_steps", "env_steps"]
    print(f"{args.env_id}, budget {args.budget_s:.0f} s per run")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join("-" if row.get(c) is None else str(row[c]) for c in columns) + " |")
    for seed in args.seeds:
        best = {r["variant"]: r.get("best_return") for r in rows if r["seed"] == seed}
        if best.get("lstm") and best.get("feed-forward"):
            print(f"seed {seed}: LSTM best / feed-forward best = {best['lstm'] / best['feed-forward']:.2f}")


if __name__ == "__main__":
    main()
