"""The service against its peers, every env on one page, from the headline sittings' raw rows alone.

    python bench/fair_summary.py            # writes docs/peers.md

`HEADLINES` names, per env, the results directory whose table is the env's headline (the latest sitting its
pre-registered rule made the headline) and how the env stands to the service's design: `designed on` (its
defaults or an auto rule were made there, or it was looked at while they were) or `held out` (bench/held_out.md:
named before any rule was designed, never looked at while designing); the two lists are held_out.md's. Per env and
peer: the final score (median over seeds, 95 % interval), ours/peer on the final mark and the area
(bench/fair_tables.py's `compare`: a ratio of random-normalised means, or the difference where a ratio says
nothing), the env steps each side had made by the last mark, and in how many seeds ours scores below the peer's
final at the peer's own env steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.fair_sides import kept_side  # noqa: E402
from bench.fair_tables import cell, collect, compare, equal_steps, finals_and_areas, fmt, read_rows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
#: The page this writes.
PAGE = os.path.join(ROOT, "docs", "peers.md")
#: The sides compared with `ours` here: the peers, and the service without its mask.
PEERS = ("sb3", "sb3-scaled", "ours-unmasked", "maskable-ppo", "sb3-dqn-flat")


@dataclass(frozen=True)
class Headline:
    """One env's headline sitting: its results directory under bench/results and how the env stands to the design."""

    folder: str
    env_id: str
    stands: str  # "designed on" or "held out"
    why: str  # what the design did there, in a few words


HEADLINES = (
    Headline("2026-11-28-fair-cartpole", "CartPole-v1", "designed on", "defaults tuned here"),
    Headline("2026-11-28-fair-acrobot", "Acrobot-v1", "designed on", "defaults tuned here"),
    Headline("2026-11-28-fair-lunarlander", "LunarLander-v3", "designed on", "defaults tuned here"),
    Headline("2026-11-28-fair-mountaincar", "MountainCar-v0", "designed on", "held random actions made here"),
    Headline("2026-11-28-fair-taxi", "Taxi-v4", "designed on", "the mask and the re-check made here"),
    Headline("2026-11-28-fair-actions", "bench.action_kinds:ConnectFourVsRandom-v0", "designed on",
             "masks tested here"),
    Headline("2026-11-28-fair-actions", "bench.action_kinds:MultiDiscreteLunarLander-v3", "designed on",
             "the product space tested here"),
    Headline("2026-11-30-fair-minatar-breakout", "bench.peer_envs:MinAtar/Breakout-v1", "designed on",
             "untouched defaults: no rule fires"),
    Headline("2026-11-30-fair-flappy-ll", "bench.peer_envs:FlappyBird/Features-v0", "designed on",
             "untouched defaults: no rule fires"),
    Headline("2026-11-30-fair-highway", "highway_env:highway-fast-v0", "designed on", "the auto replay ratio"),
    Headline("2026-11-30-fair-popgym-sb3-stacked", "popgym:popgym-PositionOnlyCartPoleEasy-v0", "designed on",
             "the auto observation history"),
    Headline("2026-11-30-fair-minigrid-defaults", "bench.peer_envs:MiniGrid/DoorKey-5x5-v0", "designed on",
             "the auto image codes"),
    Headline("2026-11-30-fair-catch", "bench.held_out_envs:bsuite-catch-v0", "held out",
             "no rule or default designed here"),
    Headline("2026-11-30-fair-deep-sea-treasure", "bench.held_out_envs:mo-deep-sea-treasure-v0", "held out",
             "no rule or default designed here"),
    Headline("2026-12-01-fair-stocks", "gym_anytrading:stocks-v0", "held out", "no rule or default designed here"),
)


def verdict_cell(found: dict) -> str:
    """'ahead 3.22× [1.37, 5.63]', or for a difference 'level, difference -0.03 [-0.10, 0.00]'."""
    if found["verdict"] is None:
        return "too few seeds"
    bounds = f"[{fmt(found['low'], 2)}, {fmt(found['high'], 2)}]"
    if found["kind"] == "difference":
        return f"{found['verdict']}, difference {fmt(found['point'], 2)} {bounds}"
    return f"{found['verdict']} {fmt(found['point'], 2)}× {bounds}"


def steps_ratio(pairs: list[dict]) -> str:
    """Ours' median env steps by the last mark over the peer's (a service run that solved early stopped there)."""
    if not pairs:
        return "–"
    return f"{statistics.median(p['ours_steps'] for p in pairs) / statistics.median(p['steps'] for p in pairs):.1f}×"


def headline_rows(headline: Headline) -> list[str]:
    """The page's rows of one env: a row per peer side in its headline sitting."""
    directory = os.path.join(RESULTS, headline.folder)
    scores, ends, random_score, _, mark_s, _ = collect([directory])
    env = headline.env_id
    if env not in scores or "ours" not in scores[env]:
        raise SystemExit(f"{headline.folder}: no rows of ours on {env}")
    order, random = sorted(mark_s[env]), random_score[env]
    results = {side: finals_and_areas(scores[env][side].values(), order) for side in scores[env]}
    kept_all = list(ends[env][kept_side("ours")].values())
    kept = [value for value in kept_all if value is not None]
    kept_cell = (cell(kept) if kept else "–") + (f" ({len(kept_all) - len(kept)} none)" if len(kept) < len(kept_all)
                                                 else "")
    pairs = equal_steps(env, read_rows([directory], "scores.jsonl"), random)
    link = f"[{headline.folder}](../bench/results/{headline.folder}/README.md)"
    rows = []
    for peer in (side for side in PEERS if side in results):
        own = [p for p in pairs if p["peer"] == peer]
        reached = [p for p in own if p["at"] is not None]
        beyond = len(own) - len(reached)
        behind = sum(1 for p in reached if p["at"] < p["score"])
        equal_steps_cell = f"{behind} of {len(reached)}" if reached else "–"
        if beyond:  # ours never made as many env steps there: no score of ours to set beside the peer's
            equal_steps_cell += f" ({beyond} beyond ours' steps)"
        rows.append(
            f"| {env} | {headline.stands} ({headline.why}) | {max(mark_s[env].values()):g} s | "
            f"{len(results['ours'][0])}/{len(results[peer][0])} | {fmt(random)} | {cell(results['ours'][0])} | "
            f"{kept_cell} | {peer} | {cell(results[peer][0])} | "
            f"{verdict_cell(compare(results['ours'][0], results[peer][0], random))} | "
            f"{verdict_cell(compare(results['ours'][1], results[peer][1], random))} | {steps_ratio(own)} | "
            f"{equal_steps_cell} | {link} |")
    return rows


def sitting_lines(folders: list[str]) -> list[str]:
    """Where each headline ran: its sittings' commits, machines and dates."""
    lines = []
    for folder in folders:
        rows = read_rows([os.path.join(RESULTS, folder)], "runs.jsonl")
        with_runs = {r["sitting"] for r in rows if r.get("kind") == "run"}  # a sitting stopped before its first run
        sittings = [r for r in rows if r.get("kind") == "sitting" and r["sitting"] in with_runs]
        commits = sorted({s["commit"][:7] for s in sittings})
        machines = sorted({s["machine"]["cpu"] for s in sittings})
        days = sorted({f"{s['sitting'][:4]}-{s['sitting'][4:6]}-{s['sitting'][6:8]}" for s in sittings})
        lines.append(f"- {folder}: {len(sittings)} sitting{'s' if len(sittings) > 1 else ''} on {', '.join(days)}, "
                     f"commit {', '.join(commits)}, {'; '.join(machines)}")
    return lines


def page() -> str:
    """The markdown of docs/peers.md."""
    lines = ["# The service against its peers", "",
             "Generated by `python bench/fair_summary.py` from the raw rows (runs.jsonl, scores.jsonl) of each env's "
             "headline sitting under the fair harness (`bench/fair_run.py`: the same wall-clock marks, one evaluator "
             "outside training, the same fresh episodes for every side). Do not edit by hand: docs/performance.md "
             "says what the figures mean; each sitting's README says how it ran and what ran beside it.", "",
             "Final: the score at the last mark, median over seeds [95 % bootstrap interval]; kept: the policy the "
             "service hands over, on the same episodes. Ours vs peer: the ratio of random-normalised seed means with "
             "a 95 % bootstrap interval, *level* where it crosses 1, or the difference of the means where a ratio "
             "says nothing (a side not above random play). Env steps: ours' median by the last mark over the peer's "
             "(a service run that solved early stopped stepping there). Below at equal steps: seeds where ours, at "
             "the peer's own env steps, scores below the peer's final.", "",
             "| env | stands | budget | seeds ours/peer | random play | ours: final | ours: kept | peer | peer: final "
             "| final: ours vs peer | area: ours vs peer | env steps | below at equal steps | sitting |",
             "|---" * 14 + "|"]
    for headline in HEADLINES:
        lines += headline_rows(headline)
    lines += ["", "## Sittings", "", *sitting_lines(list(dict.fromkeys(h.folder for h in HEADLINES))), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Writes docs/peers.md (or --out)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=PAGE, help="where to write the page")
    args = parser.parse_args(argv)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(page())
    print("wrote", args.out)


if __name__ == "__main__":
    main()
