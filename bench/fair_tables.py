"""Tables and learning curves of the fair harness, from its raw data alone (bench/fair_run.py's JSON lines).

    python bench/fair_tables.py bench/results/2026-11-27-fair-classic

writes <dir>/tables.md and one PNG per env (<dir>/<env>.png; `--no-png`: tables only). A seed's score at a mark
is the mean return of the snapshot's evaluation episodes (the shared seeds; bench/fair_eval.py); a mark with no
policy yet (ours before its learner's first weights) counts as random play. Per env and side: the median over seeds
at each mark with a 95 % bootstrap interval (resampling seeds), the final score (the last mark), the area under the
curve (the mean score over the marks, i.e. the curve's area divided by the budget), the IQM of the final scores where
there are >= 5 seeds, the illegal actions per episode at the last mark where the env gives a mask (median over
seeds), the median CPU-seconds, env steps and train steps of the runs, and for each service side (ours,
ours-unmasked) its own evaluator's best re-checked score (the kept policy's re-check), the kept, exported policy
replayed on the shared episodes (with its illegal actions per episode), and the score of its last weights at the
run's own end (with theirs). The ratio ours/peer, for every other side of the env (ours-unmasked included: what
honouring the mask is worth), is taken on random-normalised scores (score - random play's), as the ratio of the seed
means with a 95 % bootstrap interval (seeds of each side resampled apart); an interval that crosses 1 is reported as
level; where a ratio says nothing (ours not above random play on average, or the peer not in > 2.5 % of resamples)
the difference of the means stands instead (`compare`). Each (sitting, seed) is one sample: a second sitting adds
seeds, it never replaces the first. Last, per seed, ours' score at each peer's final env steps (what both learn from
the same experience; `equal_steps`): an interpolation between ours' marks, whose env steps come from its actors'
progress files (written every 5 s, so a mark's count can lag, in ours' favour).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.fair_sides import OURS_FLAGS, RANDOM_DRAWS, SIDES, kept_side  # noqa: E402

#: Each side's colour in the curves' plots, in the order the sides are drawn.
SIDE_COLORS = dict(zip(SIDES, ("tab:blue", "tab:purple", "tab:cyan", "tab:olive", "tab:orange", "tab:green", "tab:red",
                              "tab:brown"), strict=True))

BOOTSTRAP = 10_000


def read_jsonl(path: str) -> list[dict]:
    """The rows of a JSON lines file (none if it is absent)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_rows(directories: list[str], name: str) -> list[dict]:
    """The rows of `name` (runs.jsonl or scores.jsonl) in each results directory, in order."""
    return [row for directory in directories for row in read_jsonl(os.path.join(directory, name))]


def interval(values: list[float], statistic=np.median, seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval of `statistic` over `values` (resampled with replacement)."""
    data = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).choice(data, size=(BOOTSTRAP, len(data)))
    stats = np.apply_along_axis(statistic, 1, draws) if statistic is not np.median else np.median(draws, axis=1)
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def iqm(values: list[float]) -> float | None:
    """Interquartile mean (the middle half, as in rliable), None below 5 values."""
    if len(values) < 5:
        return None
    data = np.sort(np.asarray(values, dtype=float))
    cut = int(np.floor(len(data) * 0.25))
    return float(np.mean(data[cut:len(data) - cut]))


def resampled_means(ours: list[float], peer: list[float], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """BOOTSTRAP resampled means of each side's seeds (drawn from one generator, ours first)."""
    rng = np.random.default_rng(seed)
    return tuple(rng.choice(np.asarray(values, float), size=(BOOTSTRAP, len(values))).mean(axis=1)
                 for values in (ours, peer))


def difference_interval(ours: list[float], peer: list[float], seed: int = 1) -> tuple[float, float, float]:
    """(difference of means ours - peer, low, high): the verdict where a ratio is undefined."""
    a, b = resampled_means(ours, peer, seed)
    return float(np.mean(ours) - np.mean(peer)), float(np.percentile(a - b, 2.5)), float(np.percentile(a - b, 97.5))


def ratio_interval(ours: list[float], peer: list[float], seed: int = 1) -> tuple[float | None, float, float, float]:
    """(ratio of means, low, high, share of resamples whose peer mean is <= 0) of two sets of normalised scores."""
    a, b = resampled_means(ours, peer, seed)
    bad = float(np.mean(b <= 0))
    point = float(np.mean(ours) / np.mean(peer)) if np.mean(peer) > 0 else None
    ratios = a[b > 0] / b[b > 0]
    if not len(ratios):
        return point, float("nan"), float("nan"), bad
    return point, float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5)), bad


def per_episode(row: dict) -> float | None:
    """A score row's illegal actions per evaluation episode, None where the env gave no mask (or no policy played)."""
    if row.get("illegal_actions") is not None:
        return float(np.mean(row["illegal_actions"]))
    if row.get("illegal_actions_total") is not None:
        return row["illegal_actions_total"] / row["eval_episodes"]
    return None


def random_play(rows: list[dict]) -> dict[str, float]:
    """Mean random-play return per env; where an env has rows drawn from their own stream, of those only.

    Earlier rows drew from the env's own generator, which an env that draws while stepping (an opponent) mirrors.
    """
    randoms: dict[str, dict[bool, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["side"] == "random":
            randoms[row["env_id"]][row.get("draws") == RANDOM_DRAWS] += row["returns"]
    return {env: float(np.mean(kinds[True] or kinds[False])) for env, kinds in randoms.items()}


def collect(directories: list[str]):
    """(scores[env][side][(sitting, seed)] = {mark: score}, ends, random play per env, runs, mark seconds, illegal).

    `illegal[env][side][(sitting, seed)]`: illegal actions per episode at the last mark (kept sides: of the policy).
    """
    rows = read_rows(directories, "scores.jsonl")
    runs = [r for r in read_rows(directories, "runs.jsonl") if r.get("kind") == "run"]
    random_score = random_play(rows)
    scores: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    ends: dict = defaultdict(lambda: defaultdict(dict))
    mark_s: dict = defaultdict(dict)
    illegal: dict = defaultdict(lambda: defaultdict(dict))
    at_marks: dict = defaultdict(dict)  # (env, side, key) -> {mark: illegal actions per episode}
    for row in rows:
        if row["side"] == "random":
            continue
        env, key = row["env_id"], (row["sitting"], row["seed"])
        if row["side"].endswith("-kept"):  # the policy the run kept: one score per run, None where it kept none
            ends[env][row["side"]][key] = float(np.mean(row["returns"])) if row["returns"] else None
            if per_episode(row) is not None:
                illegal[env][row["side"]][key] = per_episode(row)
            continue
        if not row.get("run_end"):
            at_marks[(env, row["side"], key)][row["mark"]] = per_episode(row)
        value = float(np.mean(row["returns"])) if row["returns"] else random_score[env]
        if row.get("run_end"):
            ends[env][row["side"]][key] = (value, row["at_s"], per_episode(row))
        else:
            scores[env][row["side"]][key][row["mark"]] = value
            mark_s[env][row["mark"]] = row["mark_s"]
    for (env, side, key), counts in at_marks.items():
        if counts[max(counts)] is not None:
            illegal[env][side][key] = counts[max(counts)]
    return scores, ends, random_score, runs, mark_s, illegal


def fmt(value, digits: int = 1) -> str:
    """A table cell: '-' for None."""
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.{digits}f}"


def cell(values: list[float]) -> str:
    """'median [low, high]' over seeds."""
    if not values:
        return "-"
    low, high = interval(values)
    return f"{statistics.median(values):.1f} [{low:.1f}, {high:.1f}]"


def finals_and_areas(curves, order: list[int]) -> tuple[list[float], list[float]]:
    """Per curve ({mark: score}) with a score at every mark of `order`: its final score and area (mean over marks)."""
    complete = [curve for curve in curves if all(m in curve for m in order)]
    return [curve[order[-1]] for curve in complete], [float(np.mean([curve[m] for m in order])) for curve in complete]


def env_tables(env: str, scores, ends, random_score: float, runs: list[dict], marks: dict,
               illegal: dict) -> tuple[list[str], dict]:
    """The markdown of one env, and per side the seeds' final and area scores (for the ratios)."""
    sides = [side for side in SIDES if side in scores[env]]
    order = sorted(marks)
    budget = max(marks.values())
    out = [f"## {env} ({budget:g} s per run; random play {random_score:.1f})", "",
           "Score at each mark (seconds since launch): median over seeds [95 % bootstrap interval].", "",
           "| side | seeds | " + " | ".join(f"{marks[m]:g} s" for m in order) + " |",
           "|---|---|" + "---|" * len(order)]
    finals, areas = {}, {}
    for side in sides:
        seeds = scores[env][side]
        complete = {key: curve for key, curve in seeds.items() if all(m in curve for m in order)}
        out.append(f"| {side} | {len(complete)} | " + " | ".join(
            cell([curve[m] for curve in complete.values()]) for m in order) + " |")
        finals[side], areas[side] = finals_and_areas(complete.values(), order)
    out += ["", "Per run (median over seeds): CPU-seconds of all the run's processes, wall seconds from launch to "
            "the end of the run, env and train steps at the run's end; illegal actions per evaluation episode at the "
            "last mark where the env gives a mask (median over seeds; '-' where it gives none).", "",
            "| side | final | area (mean over marks) | IQM final | below random (final median) | illegal actions | "
            "CPU-s | wall s | env steps | train steps | own best re-checked | at its own end |", "|---" * 12 + "|"]
    for side in sides:
        side_runs = [r for r in runs if r["env_id"] == env and r["side"] == side and r.get("exit_code") == 0]

        def median(name: str, side_runs=side_runs) -> str:
            values = [r[name] for r in side_runs if r.get(name) is not None]
            return fmt(statistics.median(values), 0) if values else "-"

        recheck, end = "-", "-"
        if side in OURS_FLAGS:
            checks = [r["kept_recheck"]["confirmed_return"] for r in side_runs if r.get("kept_recheck")]
            recheck = (f"{statistics.median(checks):.1f} (median of {len(checks)}; absent in "
                       f"{len(side_runs) - len(checks)})" if checks else f"absent in all {len(side_runs)}")
            kept = list(ends[env][kept_side(side)].values())
            if kept:
                scored = [value for value in kept if value is not None]
                recheck += f"; kept policy on the shared episodes: {cell(scored)} ({len(kept) - len(scored)} none)"
                kept_illegal = list(illegal[kept_side(side)].values())
                if kept_illegal:
                    recheck += f", illegal actions per episode {statistics.median(kept_illegal):.2f}"
            end_values = list(ends[env][side].values())
            if end_values:
                end = (f"{cell([v for v, _, _ in end_values])} at "
                       f"{statistics.median([at for _, at, _ in end_values]):.0f} s")
                end_illegal = [count for _, _, count in end_values if count is not None]
                if end_illegal:
                    end += f", illegal actions per episode {statistics.median(end_illegal):.2f}"
        below = "yes" if finals[side] and statistics.median(finals[side]) < random_score else "no"
        counts = list(illegal[side].values())
        illegal_cell = fmt(statistics.median(counts), 2) if counts else "-"
        out.append(f"| {side} | {cell(finals[side])} | {cell(areas[side])} | {fmt(iqm(finals[side]))} | {below} | "
                   f"{illegal_cell} | {median('cpu_s')} | {median('wall_s')} | {median('env_steps')} | "
                   f"{median('train_steps')} | {recheck} | {end} |")
    return out, {"final": finals, "area": areas}


def compare(ours: list[float], theirs: list[float], random_score: float) -> dict:
    """Ours against a peer on one metric: a ratio of random-normalised seed means, or a difference of means.

    The difference stands where a ratio says nothing: the peer not above random play in > 2.5 % of resamples, or
    ours not above it on average (a ratio at or below 0).
    `verdict` is "ahead", "level" or "behind" (ours against the peer), or None below 2 seeds a side.
    """
    point, low, high, bad = ratio_interval([v - random_score for v in ours], [v - random_score for v in theirs])
    result = {"kind": "ratio", "point": point, "low": low, "high": high, "not_above_random": bad}
    if min(len(ours), len(theirs)) < 2:
        return {**result, "verdict": None}
    if point is None or point <= 0 or bad > 0.025:
        why = "peer" if point is None or bad > 0.025 else "ours"
        point, low, high = difference_interval(ours, theirs)
        result = {**result, "kind": "difference", "point": point, "low": low, "high": high, "why": why}
        reference = 0.0
    else:
        reference = 1.0
    verdict = "level" if low <= reference <= high else "ahead" if low > reference else "behind"
    return {**result, "verdict": verdict}


def ratio_lines(env: str, results: dict, random_score: float) -> list[str]:
    """Rows of the ratio table: ours/peer on random-normalised final and area scores."""
    lines = []
    for peer in (side for side in SIDES if side != "ours"):
        for metric in ("final", "area"):
            ours, theirs = results[metric].get("ours"), results[metric].get(peer)
            if not ours or not theirs:
                continue
            found = compare(ours, theirs, random_score)
            point, low, high = found["point"], found["low"], found["high"]
            words = {"ahead": "ours ahead", "level": "level", "behind": f"{peer} ahead"}
            if found["verdict"] is None:
                verdict = "too few seeds for an interval"
            elif found["kind"] == "difference":
                reason = (f"{peer} not above random play in {found['not_above_random']:.0%} of resamples"
                          if found["why"] == "peer" else "ours not above random play on average")
                verdict = (f"ratio undefined ({reason}); difference ours - {peer} {fmt(point, 2)} "
                           f"[{fmt(low, 2)}, {fmt(high, 2)}]: " + words[found["verdict"]])
                point, low, high = None, float("nan"), float("nan")  # the ratio's columns stay empty
            else:
                verdict = words[found["verdict"]]
            lines.append(f"| {env} | {peer} | {metric} | {len(ours)}/{len(theirs)} | {fmt(point, 2)} | "
                         f"[{fmt(low, 2)}, {fmt(high, 2)}] | {verdict} |")
    return lines


def equal_steps(env: str, rows: list[dict], random_score: float) -> list[dict]:
    """Ours against each peer at the peer's own env steps: what the two learn from the same experience.

    Per seed (matched by seed number, so the two may come from different sittings; a side's latest sitting of the
    seed counts), the peer's score at its last mark beside ours' score at the same env steps (`at`), interpolated
    linearly in env steps between ours' marks (random play at 0 steps); None where ours never got there.
    """
    runs: dict = defaultdict(lambda: defaultdict(dict))  # side -> seed -> sitting -> [(env steps, score)] by mark
    for row in sorted((r for r in rows if r["env_id"] == env and "mark" in r and not r.get("run_end")
                       and r.get("env_steps") is not None), key=lambda r: r["mark"]):
        score = float(np.mean(row["returns"])) if row["returns"] else random_score
        runs[row["side"]][row["seed"]].setdefault(row["sitting"], []).append((row["env_steps"], score))
    curves = {side: {seed: sittings[max(sittings)] for seed, sittings in seeds.items()} for side, seeds in runs.items()}
    pairs = []
    for peer in (side for side in SIDES if side not in OURS_FLAGS and side in curves):
        for seed in sorted(set(curves.get("ours", {})) & set(curves[peer])):
            steps, score = curves[peer][seed][-1]
            ours = curves["ours"][seed]
            xs, ys = [0] + [x for x, _ in ours], [random_score] + [y for _, y in ours]
            at = float(np.interp(steps, xs, ys)) if steps <= xs[-1] else None
            pairs.append({"peer": peer, "seed": seed, "steps": steps, "score": score, "at": at,
                          "ours_steps": xs[-1], "ours_final": ys[-1]})
    return pairs


def equal_steps_lines(env: str, rows: list[dict], random_score: float) -> list[str]:
    """The rows of the equal-env-steps table (`equal_steps`)."""
    return [f"| {env} | {p['peer']} | {p['seed']} | {p['steps']:,} | {p['score']:.1f} | {fmt(p['at'])} | "
            f"{p['ours_steps']:,} | {p['ours_final']:.1f} |" for p in equal_steps(env, rows, random_score)]


def plot(env: str, scores, random_score: float, marks: dict, directory: str) -> str:
    """One PNG: median and 95 % interval over seeds against seconds since launch, every side, random play."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = env.rpartition(":")[2]  # a user's `module:EnvId` without its module
    order = sorted(marks)
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for side, color in SIDE_COLORS.items():
        curves = [c for c in scores[env].get(side, {}).values() if all(m in c for m in order)]
        if not curves:
            continue
        xs = [0.0] + [marks[m] for m in order]
        medians = [random_score] + [statistics.median([c[m] for c in curves]) for m in order]
        bands = [(random_score, random_score)] + [interval([c[m] for c in curves]) for m in order]
        axes.plot(xs, medians, color=color, marker=".", label=f"{side} ({len(curves)} seeds)")
        axes.fill_between(xs, [b[0] for b in bands], [b[1] for b in bands], color=color, alpha=0.2)
    axes.axhline(random_score, color="grey", linestyle="--", linewidth=0.8, label="random play")
    axes.set(xlabel="seconds since launch (start-up included)", ylabel="greedy return (shared eval episodes)",
             title=f"{name}: median and 95 % interval over seeds")
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    path = os.path.join(directory, name.replace("/", "-") + ".png")
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def machine_lines(directories: list[str], runs: list[dict]) -> list[str]:
    """Where and when the data came from: sittings, commits, machines, load averages at the runs' starts."""
    sittings = [r for r in read_rows(directories, "runs.jsonl") if r.get("kind") == "sitting"]
    lines = ["## Sittings", ""]
    for sitting in sittings:
        own = [r for r in runs if r["sitting"] == sitting["sitting"]]
        loads = [r["machine"]["loadavg"][0] for r in own]
        boot = f", boot {sitting['machine']['boot_id'][:8]}" if sitting["machine"].get("boot_id") else ""
        lines.append(f"- {sitting['sitting']}: commit {sitting['commit']}, {sitting['machine']['cpu']} "
                     f"(nproc {sitting['machine']['nproc']}{boot}), {len(own)} runs, 1-min load average at run starts "
                     f"{fmt(min(loads, default=None))}-{fmt(max(loads, default=None))}; `{' '.join(sitting['argv'])}`")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Writes tables.md and the PNGs of one results directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="a results directory of bench/fair_run.py")
    parser.add_argument("--no-png", action="store_true", help="tables only (no matplotlib needed)")
    parser.add_argument("--beside", nargs="+", default=[], metavar="DIR",
                        help="other results directories of the same envs and shared episodes whose rows join this "
                             "one's as further sittings (a candidate's sitting beside the headline's); tables.md and "
                             "the PNGs are written to `directory` only")
    args = parser.parse_args(argv)
    directory, directories = args.directory, [args.directory, *args.beside]
    scores, ends, random_score, runs, mark_s, illegal = collect(directories)
    if not scores:
        raise SystemExit(f"{directory}: no scores.jsonl rows of trained sides")
    command = " ".join([directory, "--beside", *args.beside] if args.beside else [directory])
    lines = [f"# Fair harness: {os.path.basename(os.path.abspath(directory))}", "",
             f"Generated by `python bench/fair_tables.py {command}` from runs.jsonl and scores.jsonl; "
             "see bench/fair_run.py and bench/fair_eval.py for the protocol.", ""]
    ratios = ["## Ratio ours / peer (random-normalised, ratio of seed means, 95 % bootstrap interval)", "",
              "| env | peer | metric | seeds ours/peer | ratio | 95 % interval | verdict |", "|---" * 7 + "|"]
    steps = ["## At equal env steps: the peer's last mark beside ours at the same env steps (per seed)", "",
             "| env | peer | seed | peer's env steps | peer's score | ours at those steps | ours' env steps | "
             "ours' final |", "|---" * 8 + "|"]
    rows = read_rows(directories, "scores.jsonl")
    for env in scores:
        table, results = env_tables(env, scores, ends, random_score[env], runs, mark_s[env], illegal[env])
        lines += table + [""]
        ratios += ratio_lines(env, results, random_score[env])
        steps += equal_steps_lines(env, rows, random_score[env])
        if not args.no_png:
            print("wrote", plot(env, scores, random_score[env], mark_s[env], directory), flush=True)
    lines += ratios + [""] + steps + [""] + machine_lines(directories, runs) + [""]
    with open(os.path.join(directory, "tables.md"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    print("wrote", os.path.join(directory, "tables.md"), flush=True)


if __name__ == "__main__":
    main()
