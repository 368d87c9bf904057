"""Which auto settings fire where: the resolve step's pick of every auto setting, per env, held-out families marked.

Each env runs the service's own resolve step (`dqn-service config --json local --resolved`, the random play a run
starts with) in a process of its own, with its default seed. A setting "fires" where its pick differs from what the
run would use without the rule (`NEUTRAL`): a rule that never fires outside the family it was designed on cannot
show that it pays anywhere else. Reads no score: the held-out families stay unseen.

    python bench/auto_settings.py --json bench/results/DATE-auto-settings/picks.jsonl
    python bench/auto_settings.py --table-from bench/results/DATE-auto-settings/picks.jsonl   # the table again

(the default envs need the service's bench-envs and held-out-envs extras and popgym; MiniGrid ids need minigrid, as
bench/peer_envs.py says; an env this box cannot make gets a row naming the error). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bench.fair_sides import PLAIN_PICKS  # noqa: E402
from bench.held_out_envs import held_out_ids  # noqa: E402
from dqn.settings.common import AUTO_FROM_ENV  # noqa: E402

#: What each auto setting amounts to where its rule does not fire: the plain learner, and no mask.
NEUTRAL = {**PLAIN_PICKS, "action_mask": "none"}
#: The envs the service was designed on (bench/held_out.md), the families it is judged on being added at run time.
DESIGNED_ON = ["CartPole-v1", "Acrobot-v1", "LunarLander-v3", "MountainCar-v0", "Taxi-v4",
               "bench.action_kinds:ConnectFourVsRandom-v0", "bench.action_kinds:MultiDiscreteLunarLander-v3",
               "bench.peer_envs:MinAtar/Breakout-v1", "bench.peer_envs:MinAtar/Asterix-v1",
               "bench.peer_envs:MinAtar/Freeway-v1", "bench.peer_envs:MinAtar/Seaquest-v1",
               "bench.peer_envs:MinAtar/SpaceInvaders-v1", "bench.peer_envs:FlappyBird/Features-v0",
               "bench.peer_envs:MiniGrid/DoorKey-5x5-v0", "bench.peer_envs:MiniGrid/Empty-Random-6x6-v0",
               "bench.peer_envs:MiniGrid/LavaGapS5-v0", "highway_env:highway-fast-v0",
               "popgym:popgym-PositionOnlyCartPoleEasy-v0", "popgym:popgym-NoisyPositionOnlyCartPoleEasy-v0",
               "bench.pomdp_envs:CartPoleNoVelocity-v0"]


def picks(env_id: str, timeout_s: float) -> dict:
    """The env's resolved auto settings and each one's reason line, or the error that stopped the resolve step."""
    env = {**os.environ, "DQN_ENV_ID": env_id, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        done = subprocess.run([sys.executable, "-m", "launcher", "config", "--json", "local", "--resolved"],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"env_id": env_id, "error": f"no answer within {timeout_s:.0f} s"}
    if done.returncode != 0:
        return {"env_id": env_id, "error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    settings, _ = json.JSONDecoder().raw_decode(done.stdout)
    reasons = {name: line.split(f"{name} auto: ", 1)[1] for line in done.stderr.splitlines()
               for name in AUTO_FROM_ENV if f" {name} auto: " in line}
    return {"env_id": env_id, "picks": {name: settings[name] for name in AUTO_FROM_ENV}, "reasons": reasons}


def table(rows: list[dict], held_out: dict[str, str]) -> str:
    """Markdown: one row per env, a fired pick in bold; the count of envs each setting fired on, per side."""
    names = list(AUTO_FROM_ENV)
    lines = ["| env | held out | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    fired = {(name, side): 0 for name in names for side in (True, False)}
    for row in rows:
        family = held_out.get(row["env_id"])
        if "error" in row:
            lines.append(f"| {row['env_id']} | {family or 'no'} | " + " | ".join(["—"] * len(names)) + " |")
            continue
        cells = []
        for name in names:
            value = row["picks"][name]
            fires = value != NEUTRAL[name]
            fired[name, family is not None] += fires
            cells.append(f"**{value}**" if fires else f"{value}")
        lines.append(f"| {row['env_id']} | {family or 'no'} | " + " | ".join(cells) + " |")
    made = [row for row in rows if "error" not in row]
    count_held = sum(row["env_id"] in held_out for row in made)
    lines.append(f"| fired on (designed on / held out, of {len(made) - count_held} / {count_held}) | | "
                 + " | ".join(f"{fired[name, False]} / {fired[name, True]}" for name in names) + " |")
    errors = [f"- {row['env_id']}: {row['error']}" for row in rows if "error" in row]
    return "\n".join(lines + ([""] + errors if errors else []))


def main(argv: list[str] | None = None) -> None:
    """Resolves every env, appends the rows to --json when given, prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=None, help="env ids (default: designed-on, then held-out)")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="deadline of one env's resolve step")
    parser.add_argument("--json", default=None, help="append one JSON row per env here")
    parser.add_argument("--table-from", default=None, help="print the table of this file's rows (the last per env, "
                        "in the order envs first appear) and resolve nothing")
    args = parser.parse_args(argv)
    held_out = {env_id: family for family, ids in held_out_ids().items() for env_id in ids}
    if args.table_from:
        with open(args.table_from, encoding="utf-8") as handle:
            latest = {row["env_id"]: row for row in map(json.loads, handle) if row}
        print(table(list(latest.values()), held_out))
        return
    envs = args.envs or DESIGNED_ON + list(held_out)
    rows = []
    for env_id in envs:
        rows.append(picks(env_id, args.timeout_s))
        if args.json:
            with open(args.json, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(rows[-1]) + "\n")
    print(table(rows, held_out))


if __name__ == "__main__":
    main()
