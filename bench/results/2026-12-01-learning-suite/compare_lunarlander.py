"""LunarLander-v3 at the current code against 203513e, seeds 1-7: the README's rule for calling a slowdown.

Reads this folder's lunarlander*.json rows; a run that does not solve ranks above every run that does. Then, read
after the rule: the train step of the evaluation whose re-check first reached the threshold, from the runs'
evaluation records copied to lunarlander-evals/.

    python bench/results/2026-12-01-learning-suite/compare_lunarlander.py
"""

from __future__ import annotations

import glob
import json
import os
import statistics

from scipy.stats import mannwhitneyu

HERE = os.path.dirname(os.path.abspath(__file__))
UNSOLVED = float("inf")


def rows(*patterns: str) -> list[dict]:
    """The rows of the files matching `patterns` in this folder, in file order."""
    paths = [path for pattern in patterns for path in sorted(glob.glob(os.path.join(HERE, pattern)))]
    return [row for path in paths for row in json.load(open(path, encoding="utf-8"))["rows"]]


def figure(row: dict, key: str) -> float:
    """Train steps or time to the threshold; unsolved ranks last."""
    return row[key] if row["solved"] else UNSOLVED


def solving_step(side: str, seed: int) -> float:
    """The train step of the first evaluation whose re-check reached 200 (LunarLander's threshold)."""
    with open(os.path.join(HERE, "lunarlander-evals", f"{side}-s{seed}.jsonl"), encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    steps = [r["train_step"] for r in records if (r.get("confirmed_return") or float("-inf")) >= 200]
    return steps[0] if steps else UNSOLVED


def main() -> None:
    sides = {"current": rows("lunarlander.json", "lunarlander-s[0-9].json"),
             "203513e": rows("lunarlander-203513e.json", "lunarlander-203513e-s[0-9].json")}
    for name, side in sides.items():
        steps = [figure(r, "train_steps") for r in side]
        times = [figure(r, "time_to_threshold_s") for r in side]
        print(f"{name}: seeds {[r['seed'] for r in side]}; train steps {steps} (median {statistics.median(steps)}); "
              f"times {times} (median {statistics.median(times)}); holds {sum(r['check_holds'] for r in side)}"
              f"/{len(side)}")
    for key in ("train_steps", "time_to_threshold_s"):
        test = mannwhitneyu([figure(r, key) for r in sides["current"]], [figure(r, key) for r in sides["203513e"]],
                            alternative="two-sided")
        print(f"{key}: Mann-Whitney U {test.statistic:g}, two-sided p {test.pvalue:.4f}")
    solving = {name: [solving_step(name, r["seed"]) for r in side] for name, side in sides.items()}
    for name, steps in solving.items():
        print(f"after the rule, {name}: solving evaluation's train step {steps} (median {statistics.median(steps)})")
    test = mannwhitneyu(solving["current"], solving["203513e"], alternative="two-sided")
    print(f"solving evaluation's train step: Mann-Whitney U {test.statistic:g}, two-sided p {test.pvalue:.4f}")


if __name__ == "__main__":
    main()
