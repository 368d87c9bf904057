"""Breakout learning on this box: ours beside Stable-Baselines3 DQN, same seeds and wall clock, curves as PNG.

Per seed and side, one after the other (never two trainings at once):
- ours: `dqn-service local --preset P --seed S --max-wall-time-s B` with a fresh --root-dir. Every 10 s and when the
  run ends the bench reads the learner's and actors' progress files (train step, agent steps); each evaluation in
  `<root>/evaluator/evals.jsonl` gets the agent steps of that moment (interpolated).
- sb3: `bench/peers/sb3_atari.py` under the peer virtualenv's python (rl-baselines3-zoo's `atari` entry).
Both clocks start at Popen. Both evaluate the same way (epsilon 0.05, at most 18,000 frames, a new best re-checked
on fresh episodes); an evaluation counts at the lower of its average and its re-check. Results merge into
`--json` by (side, seed), so the sides and seeds may run in different sittings; every call re-plots all rows.

    .venv/bin/python bench/breakout_learning.py --sides ours --seeds 1 --minutes 90
    .venv/bin/python bench/breakout_learning.py --sides sb3 --seeds 1 --minutes 90 --peer-python peers-venv/bin/python
    .venv/bin/python bench/breakout_learning.py --sides ours --seeds 1 --variant bfloat16 -- --compute-dtype bfloat16
    .venv/bin/python bench/breakout_learning.py --plot-only        # the table and PNGs from the JSON

The table's SGD-rate column is train steps per second between minutes 20 and 80 of a run (interpolated between
evaluations): both sides learn then, start-up and warm-up are behind them, so the ratio is the learners' own.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bench.common import cpu_name  # noqa: E402
from bench.fair_tables import read_jsonl  # noqa: E402
from bench.role_cpu import progress  # noqa: E402

CHECKPOINTS_MIN = (30, 60, 90)
RATE_WINDOW_MIN = (20, 80)
#: The shortest window a rate is given for (a run that finished training early).
MIN_RATE_WINDOW_MIN = 30
COLORS = {"ours": "tab:blue", "sb3": "tab:orange"}
#: Variant rows' colours, in the order of their sorted names.
VARIANT_COLORS = ("tab:green", "tab:gray", "tab:purple", "tab:brown")
LINE_STYLES = ("-", "--", ":", "-.")
LABELS = {"ours": "dqn-service --preset {preset} @{commit}", "sb3": "SB3 DQN, rl-baselines3-zoo atari"}


def commit() -> str:
    """The short commit of this checkout (rows from different sittings may come from different code)."""
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def read_evaluations(path: str) -> list[dict]:
    """The evaluation records of a JSON lines file (lines without `average_return` skipped)."""
    return [r for r in read_jsonl(path) if "average_return" in r]


def counted_return(record: dict) -> float:
    """An evaluation's score: its average, or the lower of it and its re-check on fresh episodes."""
    confirmed = record.get("confirmed_return")
    return record["average_return"] if confirmed is None else min(record["average_return"], confirmed)


def interpolated(marks: list[tuple[float, int]], moment: float) -> int:
    """The count at `moment`, interpolated between the (moment, count) marks around it; clamped at both ends."""
    times = [t for t, _ in marks]
    index = bisect.bisect_left(times, moment)
    if index == 0:
        return marks[0][1] if marks else 0
    if index == len(marks):
        return marks[-1][1]
    (t0, s0), (t1, s1) = marks[index - 1], marks[index]
    return int(s0 + (s1 - s0) * (moment - t0) / max(t1 - t0, 1e-9))


def run_ours(seed: int, budget_s: float, preset: str, flags: list[str]) -> dict:
    """One `dqn-service local --preset` run (extra `flags` last); its evaluations with minutes and agent steps."""
    root = tempfile.mkdtemp(prefix=f"breakout-ours-seed{seed}-")
    command = [sys.executable, "-m", "launcher", "local", "--preset", preset, "--root-dir", root, "--seed",
               str(seed), "--max-wall-time-s", str(budget_s), *flags]
    started = time.time()
    marks: list[tuple[float, int]] = []
    with open(os.path.join(root, "launcher.out"), "w", encoding="utf-8") as out:
        run = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        while run.poll() is None and time.time() - started < budget_s + 300:
            try:
                run.wait(10.0)  # a mark every 10 s, and the last one as soon as the run ends, not up to 10 s later
            except subprocess.TimeoutExpired:
                pass
            marks.append((time.time(), progress(root)[1]))
        if run.poll() is None:
            run.kill()
    records = read_evaluations(os.path.join(root, "evaluator", "evals.jsonl"))
    evaluations = [{"minutes": round((r["time"] - started) / 60, 2), "agent_steps": interpolated(marks, r["time"]),
                    "train_step": r["train_step"], "return": round(counted_return(r), 2)} for r in records]
    return {"side": "ours", "seed": seed, "preset": preset, "flags": flags, "commit": commit(), "root": root,
            "exit_code": run.returncode,
            "budget_s": budget_s, "evaluations": evaluations, "agent_steps": marks[-1][1] if marks else 0,
            "train_steps": progress(root)[0]}


def run_sb3(seed: int, budget_s: float, python: str) -> dict:
    """One SB3 run (bench/peers/sb3_atari.py); its evaluations with minutes and agent steps."""
    out = tempfile.mktemp(prefix=f"breakout-sb3-seed{seed}-", suffix=".jsonl")
    started = time.time()
    command = [python, os.path.join(REPO, "bench", "peers", "sb3_atari.py"), "--seed", str(seed), "--budget-s",
               str(budget_s), "--out", out]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=budget_s + 900)
    records = read_evaluations(out)
    evaluations = [{"minutes": round((r["time"] - started) / 60, 2), "agent_steps": r["env_steps"],
                    "train_step": r["train_step"], "return": round(counted_return(r), 2)} for r in records]
    row = {"side": "sb3", "seed": seed, "commit": commit(), "out": out, "exit_code": result.returncode,
           "budget_s": budget_s,
           "evaluations": evaluations, "agent_steps": records[-1]["env_steps"] if records else 0,
           "train_steps": records[-1]["train_step"] if records else 0}
    if result.returncode:
        row["error"] = result.stderr[-800:]
    return row


def row_key(row: dict) -> tuple:
    """Rows of one side, seed, variant and CPU replace each other; others are kept beside them."""
    return row["side"], row["seed"], row.get("variant"), row.get("cpu")


def best_by(evaluations: list[dict], minutes: float) -> float | None:
    """The best counted return of trained weights within `minutes` of launch; None before the first."""
    values = [e["return"] for e in evaluations if e["minutes"] <= minutes and e["train_step"] > 0]
    return max(values) if values else None


def sgd_rate(evaluations: list[dict], window_min: tuple[float, float] = RATE_WINDOW_MIN) -> float | None:
    """Train steps per second over `window_min` (minutes since launch), interpolated between evaluations.

    A run that stopped before the window's end (it reached its max_train_steps) is measured up to its last
    evaluation, if that leaves at least MIN_RATE_WINDOW_MIN minutes; its table cell is marked "*".
    """
    marks = [(e["minutes"], e["train_step"]) for e in evaluations]
    if not marks or marks[0][0] > window_min[0]:
        return None
    end = min(window_min[1], marks[-1][0])
    if end - window_min[0] < MIN_RATE_WINDOW_MIN:
        return None
    steps = interpolated(marks, end) - interpolated(marks, window_min[0])
    return steps / ((end - window_min[0]) * 60)


def print_table(rows: list[dict]) -> None:
    """One markdown row per side and seed: best-so-far at 30/60/90 minutes, SGD rate, steps at the end.

    A row's rate ratio is against SB3's row of the same seed over the same minutes (SGD steps at batch 32 in both,
    unless its flags change the batch).
    """
    rate_header = f"SGD steps/s, min {RATE_WINDOW_MIN[0]}–{RATE_WINDOW_MIN[1]}"
    print("| side | seed | " + " | ".join(f"best @ {m} min" for m in CHECKPOINTS_MIN)
          + f" | {rate_header} | vs SB3 | agent steps | SGD steps | CPU |\n|" + "---|" * (len(CHECKPOINTS_MIN) + 7))
    peer_rows = {(row["seed"], row.get("cpu")): row for row in rows if row["side"] == "sb3"}
    shortened = other_cpu = False
    for row in sorted(rows, key=lambda r: (r["side"], r.get("variant", ""), r["seed"])):
        cells = [best_by(row["evaluations"], m) if m * 60 <= row["budget_s"] else None for m in CHECKPOINTS_MIN]
        side = row["side"] + (f" ({row['variant']})" if row.get("variant") else "")
        last = row["evaluations"][-1]["minutes"] if row["evaluations"] else 0.0
        window = (RATE_WINDOW_MIN[0], min(RATE_WINDOW_MIN[1], last))
        rate = sgd_rate(row["evaluations"], window)
        # the peer of this seed on the same CPU, else on any
        peer_row = peer_rows.get((row["seed"], row.get("cpu"))) or next(
            (peer for (seed, _), peer in peer_rows.items() if seed == row["seed"]), None)
        # The peer over the same minutes as this row: SB3's rate drifts over a run.
        peer = sgd_rate(peer_row["evaluations"], window) if peer_row else None
        ratio = f"{rate / peer:.2f}×" if rate and peer and row["side"] != "sb3" else "-"
        if ratio != "-" and row.get("cpu") != peer_row.get("cpu"):
            ratio += " †"
            other_cpu = True
        short = window[1] < RATE_WINDOW_MIN[1]  # trained out before the window's end
        rate_cell = "-" if rate is None else f"{rate:.1f}" + (" *" if short else "")
        shortened |= rate is not None and short
        print(f"| {side} | {row['seed']} | " + " | ".join("-" if c is None else f"{c:.1f}" for c in cells)
              + f" | {rate_cell} | {ratio} | {row['agent_steps']:,} | "
              f"{row['train_steps']:,} | {row.get('cpu', 'unknown')} |", flush=True)
    if other_cpu:
        print("† SB3's row of that seed ran on another CPU: a ratio across machines, not one of the same box")
    if shortened:
        print(f"* stopped before minute {RATE_WINDOW_MIN[1]} (max_train_steps reached): the rate runs from minute "
              f"{RATE_WINDOW_MIN[0]} to its last evaluation")


def plot(rows: list[dict], directory: str) -> list[str]:
    """Two PNGs: best-so-far return against minutes since launch, and against agent steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = sorted({row["variant"] for row in rows if row.get("variant")})
    cpus = list(dict.fromkeys(row.get("cpu") for row in rows))
    variant_colors = {name: VARIANT_COLORS[i % len(VARIANT_COLORS)] for i, name in enumerate(variants)}
    paths = []
    for x_key, x_label, name in (("minutes", "minutes since launch", "breakout-wall-clock.png"),
                                 ("agent_steps", "agent steps, thousands (4 frames each)",
                                  "breakout-agent-steps.png")):
        figure, axes = plt.subplots(figsize=(7.0, 5.0))
        scale = 1e-3 if x_key == "agent_steps" else 1.0
        for row in sorted(rows, key=lambda r: (r["side"], r.get("variant", ""), r["seed"])):
            side = row["side"]
            color = variant_colors[row["variant"]] if row.get("variant") else COLORS[side]
            points, best = [], None
            for evaluation in (e for e in row["evaluations"] if e["train_step"] > 0):
                best = evaluation["return"] if best is None else max(best, evaluation["return"])
                points.append((evaluation[x_key] * scale, evaluation["return"], best))
            if not points:
                continue
            end = row["budget_s"] / 60 if x_key == "minutes" else row["agent_steps"] * scale
            xs, scores, bests = zip(*points, strict=True)
            label = (LABELS[side].format(preset=row.get("preset"), commit=row.get("commit", "?"))
                     + (f" {row['variant']}" if row.get("variant") else "") + f", seed {row['seed']}"
                     + (f" [{row['cpu'].split(',')[0]}]" if row.get("cpu") else ""))
            # solid/dashed by seed; dotted/dash-dot for rows of a CPU other than the first rows'
            style = LINE_STYLES[(1 - row["seed"] % 2) + 2 * min(cpus.index(row.get("cpu")), 1)]
            axes.step([*xs, end], [*bests, bests[-1]], where="post", color=color, linestyle=style,
                      linewidth=1.3, label=label)
            axes.plot(xs, scores, linestyle="none", marker=".", color=color, alpha=0.45)
        axes.set(xlabel=x_label, ylabel="evaluation return (eps 0.05, re-checked)",
                 title="Breakout, 2 CPU cores: best so far (lines), each evaluation (dots)")
        if x_key == "minutes":
            for minutes in CHECKPOINTS_MIN:
                axes.axvline(minutes, color="grey", linewidth=0.5, linestyle=":")
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize="small", frameon=False)
        figure.tight_layout()
        os.makedirs(directory, exist_ok=True)
        paths.append(os.path.join(directory, name))
        figure.savefig(paths[-1], dpi=100)
        plt.close(figure)
    return paths


def main() -> None:
    """Runs the asked sides and seeds, merges them into the JSON, prints the table and writes the PNGs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", nargs="+", choices=("ours", "sb3"), default=["ours", "sb3"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--minutes", type=float, default=90.0, help="wall-clock budget per run")
    parser.add_argument("--preset", default="breakout-small", help="our preset")
    parser.add_argument("--peer-python", help="python of the bench-only virtualenv with SB3 (for --sides sb3)")
    parser.add_argument("--json", default=os.path.join(REPO, "docs", "atari-curves", "breakout_learning.json"))
    parser.add_argument("--png-dir", default=os.path.join(REPO, "docs", "atari-curves"),
                        help="where the PNGs go; empty: none (no matplotlib needed)")
    parser.add_argument("--plot-only", action="store_true", help="no runs: the table and PNGs from --json")
    parser.add_argument("--variant", help="name of a row run with extra flags (kept beside the preset's own rows)")
    parser.add_argument("flags", nargs="*", help="extra dqn-service local flags for our side (after --)")
    args = parser.parse_args()
    rows = []
    if os.path.exists(args.json):
        with open(args.json, encoding="utf-8") as handle:
            rows = json.load(handle)["rows"]
    if not args.plot_only:
        if "sb3" in args.sides and not args.peer_python:
            parser.error("--sides sb3 needs --peer-python")
        if bool(args.flags) != bool(args.variant):
            parser.error("extra flags need --variant NAME (and --variant needs flags): rows of the preset as shipped "
                         "must not mix with rows of other settings")
        print(f"machine: {os.cpu_count()} cores; {args.minutes:.0f} min per run; sides {args.sides}; seeds "
              f"{args.seeds}", flush=True)
        for seed in args.seeds:
            for side in args.sides:
                row = (run_ours(seed, args.minutes * 60, args.preset, args.flags) if side == "ours"
                       else run_sb3(seed, args.minutes * 60, args.peer_python))
                if side == "ours" and args.variant:
                    row["variant"] = args.variant
                row["cpu"] = cpu_name()
                print(side, seed, json.dumps({k: v for k, v in row.items() if k != "evaluations"}), flush=True)
                # a row replaces only the row of the same side, seed, variant (None: the preset as shipped) and CPU
                rows = [r for r in rows if row_key(r) != row_key(row)] + [row]
                os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
                with open(args.json, "w", encoding="utf-8") as handle:  # after every run: a cut bench keeps rows
                    json.dump({"rows": rows}, handle, indent=1)
    print_table(rows)
    for path in plot(rows, args.png_dir) if args.png_dir else ():
        print("wrote", path, flush=True)


if __name__ == "__main__":
    main()
