"""What a new user gets: envs x seeds of `dqn-service local --env-id E --seed S --max-wall-time-s T`, no other flags.

For each run: time to the env's reward_threshold (the evaluator's 10-episode greedy average and its re-check on
30 fresh episodes, from launch, start-up included), the best greedy return of trained weights by 60/120/240 s (from
`<root>/evaluator/evals.jsonl`), and the policy check: the exported best policy replayed on 50 new episodes
(`dqn-service policy-check`). Prints a table and writes everything as JSON;
with `--png-dir`, one learning-curve PNG per env (each evaluation's return against seconds, a line per seed).

Comparisons with Stable-Baselines3 are the fair harness's (bench/fair_run.py: the same wall-clock marks, evaluator
and evaluation episodes for every side); this suite reports the service alone and prints no peer figure.

    python bench/learning_suite.py --envs Acrobot-v1 LunarLander-v3 CartPole-v1 --seeds 1 2 3 4 5 --budget-s 240

`--table-from A.json B.json …` prints docs/performance.md's learning-suite table from files this script wrote, and runs
nothing.

`--variants` compares flag sets on the same envs and seeds, e.g. a recurrent Q-network against the default on a
partially observed env (`--variants "" "--lstm-size 32"`); the summary then gives each variant's median best return
at the budget and its ratio to the first variant's.

LunarLander-v3 needs the box2d extra (`pip install -c requirements.lock -e '.[box2d]'`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import save_env_png  # noqa: E402
from bench.time_to_solve import run_service  # noqa: E402

CHECKPOINTS_S = (60, 120, 240)


def reward_threshold(env_id: str) -> float | None:
    """The env's registered reward_threshold: what `dqn-service local` stops at by default."""
    import gymnasium as gym

    module, _, name = env_id.rpartition(":")
    if module:  # a user's `module:EnvId`: importing the module registers the id
        importlib.import_module(module)
    return gym.spec(name).reward_threshold


def best_by(root: str, started_epoch: float, checkpoints: tuple[int, ...]) -> dict[str, object]:
    """Best average return of trained weights (train step > 0) by each checkpoint (s after launch), and resets.

    `resets_at`: the train steps of the evaluations that asked the learner for a reset.
    """
    path = os.path.join(root, "evaluator", "evals.jsonl")
    records = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
    trained = [r for r in records if r["train_step"] > 0]
    best: dict[str, object] = {"resets_at": [r["train_step"] for r in records if r.get("reset_requested")],
                               "curve": [(round(r["time"] - started_epoch, 1), r["average_return"]) for r in trained]}
    for seconds in checkpoints:
        returns = [r["average_return"] for r in trained if r["time"] - started_epoch <= seconds]
        best[f"best_by_{seconds}s"] = max(returns) if returns else None
    return best


def run_one(env_id: str, seed: int, budget_s: float, checkpoints: tuple[int, ...], flags: str = "") -> dict:
    """One service run with only the env, seed, budget (and a variant's `flags`) set, summarised."""
    run = run_service(seed, budget_s, ["--env-id", env_id, *shlex.split(flags)])
    threshold = reward_threshold(env_id)
    check = run.get("new_episodes") or {}
    row = {"env_id": env_id, "flags": flags, "seed": seed, "threshold": threshold, "solved": run["solved"],
           "time_to_threshold_s": run["wall_time_s"] if run["solved"] else None,
           "env_steps": run.get("env_steps"), "train_steps": run.get("train_steps"),
           "check_mean_return_50": check.get("mean_return"),
           "check_holds": (check["mean_return"] >= threshold
                           if threshold is not None and "mean_return" in check else None),
           "root": run.get("root"), "error": run.get("error")}
    if "started_epoch" in run:
        row.update(best_by(run["root"], run["started_epoch"], checkpoints))
    return row


def plot(rows: list[dict], env_id: str, budget_s: float, directory: str) -> str:
    """One PNG per env: each evaluation's greedy return against seconds since launch, a line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for row in (r for r in rows if r["env_id"] == env_id and r.get("curve")):
        xs, ys = [at for at, _ in row["curve"]], [value for _, value in row["curve"]]
        label = f"seed {row['seed']}" + (f" [{row['flags']}]" if row["flags"] else "")
        axes.plot(xs, ys, marker=".", linewidth=1.0, label=label)
    threshold = next((r["threshold"] for r in rows if r["env_id"] == env_id), None)
    if threshold is not None:
        axes.axhline(threshold, color="grey", linestyle="--", linewidth=0.8, label="reward threshold (stops the run)")
    last = max((at for r in rows if r["env_id"] == env_id for at, _ in r.get("curve") or []), default=budget_s)
    axes.set(xlabel="seconds since launch (a run stops when it solves)", ylabel="greedy return (10 episodes)",
             title=f"{env_id}, defaults", xlim=(0, min(budget_s, last * 1.05)))
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    return save_env_png(figure, directory, env_id)


def fmt(value) -> str:
    """A table cell: '-' for missing values, one decimal for floats."""
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def variant_groups(rows: list[dict]):
    """(env id, flags, the variant's place among its env's variants, its runs), in the order they first appear."""
    for env_id in dict.fromkeys(r["env_id"] for r in rows):
        for index, flags in enumerate(dict.fromkeys(r["flags"] for r in rows if r["env_id"] == env_id)):
            yield env_id, flags, index, [r for r in rows if r["env_id"] == env_id and r["flags"] == flags]


def print_table(rows: list[dict], checkpoints: tuple[int, ...], budget_s: float) -> None:
    """Markdown table of all runs, then one summary per env and variant.

    The summary: solved count, median time (unsolved = budget), the median best return at the budget and its ratio
    to the first variant's.
    """
    columns = ["env_id", "flags", "seed", "time_to_threshold_s", *[f"best_by_{s}s" for s in checkpoints],
               "check_mean_return_50", "check_holds", "env_steps", "train_steps", "resets_at"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(fmt(row.get(c)) for c in columns) + " |")
    last = f"best_by_{checkpoints[-1]}s"
    baseline = None
    for env_id, flags, index, runs in variant_groups(rows):
        times = [r["time_to_threshold_s"] if r["solved"] else budget_s for r in runs]
        holds = sum(bool(r["check_holds"]) for r in runs)
        bests = [r[last] for r in runs if r.get(last) is not None]
        median_best = statistics.median(bests) if bests else None
        if index == 0:
            baseline = median_best
        ratio = (f", {median_best / baseline:.2f}x the first variant's"
                 if index and median_best is not None and baseline else "")
        print(f"{env_id} [{flags or 'defaults'}]: solved {sum(r['solved'] for r in runs)}/{len(runs)} within "
              f"{budget_s:.0f} s, median {statistics.median(times):.1f} s (unsolved counted as {budget_s:.0f} s);"
              f" median best return by {checkpoints[-1]} s: {fmt(median_best)}{ratio}; best policy holds on 50 "
              f"new episodes: {holds}/{len(runs)}")


def resets_cell(runs: list[dict]) -> str:
    """'none', or which seeds were given a fresh start and how often: 'seeds 3, 4 once'."""
    counts = {r["seed"]: len(r["resets_at"]) for r in runs if r.get("resets_at")}
    if not counts:
        return "none"
    by_count: dict[int, list[str]] = {}
    for seed, count in counts.items():
        by_count.setdefault(count, []).append(str(seed))
    words = {1: "once", 2: "twice"}
    return "; ".join(f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)} {words.get(count, f'{count} times')}"
                     for count, seeds in sorted(by_count.items()))


def suite_table(documents: list[dict]) -> str:
    """docs/performance.md's learning-suite table, one row per env and variant of each document this script wrote.

    The median time counts an unsolved run as slower than any solved one, so it reads '> budget' when most failed.
    """
    lines = ["| env, budget | solved | times to threshold | median | reset | hold |", "|---|---|---|---|---|---|"]
    for document in documents:
        budget = document["budget_s"]
        for env_id, flags, _, runs in variant_groups(document["rows"]):
            times = ", ".join(f"{r['time_to_threshold_s']:.1f}" if r["solved"] else "—" for r in runs)
            median = statistics.median(r["time_to_threshold_s"] if r["solved"] else float("inf") for r in runs)
            median_cell = f"{median:.1f} s" if median != float("inf") else f"> {budget:.0f} s"
            label = f"{env_id}{f' `{flags}`' if flags else ''}, {budget:.0f} s"
            lines.append(f"| {label} | {sum(bool(r['solved']) for r in runs)}/{len(runs)} | {times} s | "
                         f"{median_cell} | {resets_cell(runs)} | {sum(bool(r['check_holds']) for r in runs)}"
                         f"/{len(runs)} |")
    return "\n".join(lines)


def main() -> None:
    """Runs every env x seed one after another, prints the table and writes the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["Acrobot-v1", "LunarLander-v3", "CartPole-v1"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--budget-s", type=float, default=240.0, help="wall-clock budget per run, s")
    parser.add_argument("--variants", nargs="+", default=[""],
                        help="flag sets to compare, each one quoted string ('' = the defaults)")
    parser.add_argument("--json", default="runs/learning_suite.json", help="where to write all rows")
    parser.add_argument("--png-dir", default=None, help="write one learning-curve PNG per env here (e.g. "
                                                        "bench/results/DATE-learning-suite)")
    parser.add_argument("--table-from", nargs="+", default=None,
                        help="print performance.md's table from these JSON files and run nothing")
    args = parser.parse_args()
    if args.table_from:
        documents = []
        for path in args.table_from:
            with open(path, encoding="utf-8") as handle:
                documents.append(json.load(handle))
        print(suite_table(documents))
        return
    checkpoints = tuple(sorted({s for s in CHECKPOINTS_S if s <= args.budget_s} | {int(args.budget_s)}))
    print(f"machine: {os.cpu_count()} cores; budget {args.budget_s:.0f} s per run; envs {args.envs}; "
          f"seeds {args.seeds}; variants {args.variants}", flush=True)
    rows = []
    for env_id in args.envs:
        for flags in args.variants:
            for seed in args.seeds:
                rows.append(run_one(env_id, seed, args.budget_s, checkpoints, flags))
                print(json.dumps(rows[-1]), flush=True)
    print_table(rows, checkpoints, args.budget_s)
    for env_id in dict.fromkeys(r["env_id"] for r in rows) if args.png_dir else ():
        print("wrote", plot(rows, env_id, args.budget_s, args.png_dir), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump({"budget_s": args.budget_s, "rows": rows}, handle, indent=1)
    print(f"wrote {args.json}", flush=True)


if __name__ == "__main__":
    main()
