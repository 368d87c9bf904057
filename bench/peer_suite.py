"""Env families from PyPI outside gymnasium, ours beside Stable-Baselines3 DQN: same envs, seeds and wall clock.

Not all of them are held out: the service's auto rules and its advantage-learning variant were designed on some
(highway-env for the replay ratio, popgym's position-only cart-pole for the observation history, MiniGrid DoorKey
and Empty for image codes and advantage learning); none was designed on MinAtar Breakout or Flappy Bird.

Superseded by the fair harness (bench/fair_run.py, bench/fair_eval.py, bench/fair_tables.py) for any comparison:
here each side scores itself (best-so-far over unequal numbers of evaluations, SB3's inside its training process,
ours with `--target-return 1e9`, which turns its re-check off), so its figures are not like-for-like. Kept until
these families are ported to the harness.

Per env and seed, one after the other (never two trainings at once): `dqn-service local --env-id E --seed S
--max-wall-time-s B --target-return 1e9` (the defaults otherwise; the target is never reached, so it runs the whole
budget) with a fresh --root-dir, then `bench/peers/sb3_dqn.py` with the env authors' published DQN settings under
the peer virtualenv's python for the same budget. Both clocks start at Popen (start-up and imports included); only
evaluations of trained weights (train step > 0) count, each 10 greedy episodes. Prints the best-so-far greedy
return at 60/120/240 s for both and their ratio at the budget, writes the rows as JSON and one PNG per env
(best-so-far return against seconds since launch, a thin line per seed) into docs/learning-curves/.

    .venv/bin/pip install -c requirements.lock -e '.[bench-envs]' && .venv/bin/pip install --no-deps minigrid==3.0.0
    python3.11 -m venv peers-venv && peers-venv/bin/pip install stable-baselines3==2.9.2 \
        gymnasium==1.3.0 "numpy<2" minatar==1.0.15 highway-env==1.11 popgym==1.0.7 pygame==2.1.3 \
        flappy-bird-gymnasium==0.4.0 && peers-venv/bin/pip install --no-deps minigrid==3.0.0
    .venv/bin/python bench/peer_suite.py --seeds 1 2 --budget-s 240 --peer-python peers-venv/bin/python

The service's side alone, beside the SB3 rows of an earlier run, with flags of its own after `--`:

    .venv/bin/python bench/peer_suite.py --envs ENV --sides ours --peer-rows earlier.json -- --gamma 0.9
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bench.common import save_env_png  # noqa: E402
from bench.time_to_solve import SUMMARY  # noqa: E402

ENVS = ["bench.peer_envs:MinAtar/Breakout-v1", "highway_env:highway-fast-v0",
        "popgym:popgym-PositionOnlyCartPoleEasy-v0", "bench.peer_envs:FlappyBird/Features-v0",
        "bench.peer_envs:MiniGrid/DoorKey-5x5-v0"]
CHECKPOINTS_S = (60, 120, 240)


def read_jsonl(path: str) -> list[dict]:
    """The evaluation records of a JSON lines file (lines without `average_return` skipped)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [r for r in rows if "average_return" in r]


def best_so_far(records: list[dict], started: float) -> list[tuple[float, float]]:
    """(seconds since launch, best average return so far) at each evaluation of trained weights."""
    curve, best = [], None
    for record in sorted(records, key=lambda r: r["time"]):
        if record["train_step"] > 0:
            best = record["average_return"] if best is None else max(best, record["average_return"])
            curve.append((round(record["time"] - started, 2), best))
    return curve


def best_by(curve: list[tuple[float, float]], seconds: float) -> float | None:
    """The best return reached within `seconds` of launch, None if no trained evaluation came by then."""
    values = [value for at, value in curve if at <= seconds]
    return values[-1] if values else None


def run_ours(env_id: str, seed: int, budget_s: float, flags: tuple[str, ...] = ()) -> dict:
    """One `dqn-service local` run with the defaults (or `flags`), the budget and an unreachable target."""
    root = tempfile.mkdtemp(prefix=f"peer-suite-ours-seed{seed}-")
    command = [sys.executable, "-m", "launcher", "local", "--root-dir", root, "--env-id", env_id, "--seed",
               str(seed), "--max-wall-time-s", str(budget_s), "--target-return", "1e9", *flags]
    started = time.time()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=budget_s + 300)
    match = SUMMARY.search(result.stdout + result.stderr)
    row = {"root": root, "exit_code": result.returncode,
           "curve": best_so_far(read_jsonl(os.path.join(root, "evaluator", "evals.jsonl")), started)}
    if match:
        row.update(wall_time_s=float(match.group(2)), env_steps=int(match.group(3)), train_steps=int(match.group(4)))
    else:
        row["error"] = (result.stdout + result.stderr)[-800:]
    return row


def run_sb3(env_id: str, seed: int, budget_s: float, python: str) -> dict:
    """One SB3 DQN run (bench/peers/sb3_dqn.py) under the peer virtualenv's python."""
    out = tempfile.mktemp(prefix=f"peer-suite-sb3-seed{seed}-", suffix=".jsonl")
    started = time.time()
    command = [python, os.path.join(REPO, "bench", "peers", "sb3_dqn.py"), "--env-id", env_id, "--seed", str(seed),
               "--budget-s", str(budget_s), "--started-epoch", str(started), "--out", out]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=budget_s + 300)
    records = read_jsonl(out)
    row = {"out": out, "exit_code": result.returncode, "curve": best_so_far(records, started),
           "env_steps": records[-1]["env_steps"] if records else None,
           "train_steps": records[-1]["train_step"] if records else None}
    if result.returncode:
        row["error"] = result.stderr[-800:]
    return row


def fmt(value) -> str:
    """A table cell: '-' for missing values, two decimals for floats."""
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def print_table(rows: list[dict], checkpoints: tuple[int, ...]) -> None:
    """One markdown row per env and seed: best-so-far returns of both, ratio at the budget, steps."""
    last = checkpoints[-1]
    head = ["env", "seed", *[f"ours@{s}" for s in checkpoints], *[f"sb3@{s}" for s in checkpoints],
            f"ratio@{last}", "ours env/train steps", "sb3 env/train steps"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in rows:
        ours = [best_by(row["ours"]["curve"], s) for s in checkpoints]
        sb3 = [best_by(row["sb3"]["curve"], s) for s in checkpoints]
        ratio = ours[-1] / sb3[-1] if ours[-1] is not None and sb3[-1] and sb3[-1] > 0 else None
        cells = [row["env_id"], row["seed"], *ours, *sb3, ratio,
                 f"{fmt(row['ours'].get('env_steps'))}/{fmt(row['ours'].get('train_steps'))}",
                 f"{fmt(row['sb3'].get('env_steps'))}/{fmt(row['sb3'].get('train_steps'))}"]
        print("| " + " | ".join(fmt(c) for c in cells) + " |", flush=True)


def plot(rows: list[dict], env_id: str, budget_s: float, directory: str, flags: list[str] | None = None) -> str:
    """One PNG: best-so-far greedy return against seconds since launch, ours and SB3, a line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for side, color in (("ours", "tab:blue"), ("sb3", "tab:orange")):
        for index, row in enumerate(r for r in rows if r["env_id"] == env_id):
            curve = row[side]["curve"]
            if curve:  # a step plot held flat to the budget
                xs, ys = [at for at, _ in curve] + [budget_s], [v for _, v in curve] + [curve[-1][1]]
                ours_label = f"dqn-service ({' '.join(flags) if flags else 'defaults'})"
                label = (ours_label if side == "ours" else "SB3 DQN (published settings)") if index == 0 else None
                axes.step(xs, ys, where="post", color=color, linewidth=1.0, alpha=0.8, label=label)
    axes.set(xlabel="seconds since launch", ylabel="best greedy return so far (10 episodes)",
             title=env_id.rpartition(":")[2], xlim=(0, budget_s))
    for seconds in CHECKPOINTS_S:
        axes.axvline(seconds, color="grey", linewidth=0.5, linestyle=":")
    axes.legend(loc="lower right")
    figure.tight_layout()
    return save_env_png(figure, directory, env_id, flags_suffix(flags))


def flags_suffix(flags: list[str] | None) -> str:
    """The PNG name suffix of a run with service flags (`-observation-history-2`), so it keeps the defaults' picture."""
    return "".join("-" + flag.lstrip("-") for flag in flags or [])


def main() -> None:
    """Runs ours then SB3 per env and seed, prints the table, writes the JSON and the PNGs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--peer-python", help="python of the bench-only virtualenv with SB3 (needed for sb3)")
    parser.add_argument("--sides", nargs="+", choices=("ours", "sb3"), default=["ours", "sb3"],
                        help="which sides to run; a side left out gets no curve, or the one --peer-rows holds")
    parser.add_argument("--peer-rows", help="sb3 left out: take its rows from this earlier run's JSON instead")
    parser.add_argument("ours_flags", nargs="*", help="after --: flags for the service's runs (default: none)")
    parser.add_argument("--json", default="runs/peer_suite.json")
    parser.add_argument("--png-dir", default=os.path.join(REPO, "docs", "learning-curves"),
                        help="where the PNGs go; empty: none (no matplotlib needed)")
    args = parser.parse_args()
    if "sb3" in args.sides and not args.peer_python:
        parser.error("--peer-python is required to run the sb3 side")
    checkpoints = tuple(sorted({s for s in CHECKPOINTS_S if s <= args.budget_s} | {int(args.budget_s)}))
    print(f"machine: {os.cpu_count()} cores; budget {args.budget_s:.0f} s per run and side; envs {args.envs}; "
          f"seeds {args.seeds}; sides {args.sides}; service flags {args.ours_flags or 'none'}", flush=True)
    rows = []
    earlier = {}
    if args.peer_rows and "sb3" not in args.sides:
        with open(args.peer_rows, encoding="utf-8") as handle:
            earlier = {(row["env_id"], row["seed"]): row["sb3"] for row in json.load(handle)["rows"]}
    for env_id in args.envs:
        for seed in args.seeds:
            ours, sb3 = {"curve": []}, earlier.get((env_id, seed), {"curve": []})
            if "ours" in args.sides:
                ours = run_ours(env_id, seed, args.budget_s, tuple(args.ours_flags))
                print("ours", env_id, seed, json.dumps({k: v for k, v in ours.items() if k != "curve"}), flush=True)
            if "sb3" in args.sides:
                sb3 = run_sb3(env_id, seed, args.budget_s, args.peer_python)
                print("sb3 ", env_id, seed, json.dumps({k: v for k, v in sb3.items() if k != "curve"}), flush=True)
            rows.append({"env_id": env_id, "seed": seed, "ours": ours, "sb3": sb3, "ours_flags": args.ours_flags})
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w", encoding="utf-8") as handle:  # after every pair: a cut run keeps its rows
                json.dump({"budget_s": args.budget_s, "rows": rows}, handle, indent=1)
        if args.png_dir:
            print("wrote", plot(rows, env_id, args.budget_s, args.png_dir, args.ours_flags), flush=True)
    print_table(rows, checkpoints)
    print(f"wrote {args.json}", flush=True)


if __name__ == "__main__":
    main()
