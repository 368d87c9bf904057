"""The fair harness: ours and its peers trained one after another, snapshotted at the same wall-clock marks.

Sides (bench/fair_sides.py): `ours` is `dqn-service local --env-id E --seed S --max-wall-time-s B --root-dir
<fresh>`, as a user runs it (defaults: its own re-check, reset rule and stop at the env's reward threshold; a mask
of valid actions found without flags); `ours-unmasked` adds `--action-mask none`; `ours-plain` holds every auto
learning rule at its plain pick; `ours-candidate` adds the sitting's `--candidate-flags` (a proposed default). The
peers run under the peer virtualenv (its versions: bench/peers/requirements.txt; bench/peers/sb3_snapshots.py says
where each one's settings come from): `sb3` is SB3 DQN with the rl-baselines3-zoo or published recipe;
`sb3-scaled` is that recipe with n_timesteps set to the env steps `sb3` reached in this sitting for the same env
and seed (so `sb3` runs first for a seed); `maskable-ppo` is sb3-contrib's MaskablePPO with its library defaults;
`sb3-dqn-flat` is SB3 DQN on a MultiDiscrete env's combinations as one Discrete space. Each env gets the sides of
its kind unless --sides names them: a masked env (Taxi-v4, Connect Four) ours, ours-unmasked and maskable-ppo; a
multi-discrete one ours and sb3-dqn-flat; any other ours, sb3 and sb3-scaled. The seed sets `ours`' place among
the sides (seed s at place (s - 1) mod n: first, second, ... and last in turn), the same whether the seeds share a
sitting or not; there is never more than one training at a time.

Every clock starts at Popen (start-up and imports count). Marks are every budget/10 s. A peer's process saves its
policy at each mark itself; for a service run this process reads the latest weights the learner published to the
replay server's `variables` table (the product's `WeightsPuller`, polled every 0.5 s) and saves them at each mark
with their train step and the actors' env steps (progress files). A run that stops before a mark (ours stops when it
solves) leaves its last weights for the later marks, marked `after_end`. After each training, bench/fair_eval.py
scores every snapshot in its own process (under the side's python), and the policy a service run kept and exported
(`<side>-kept`); random play is scored once per env and sitting. Each score row counts the illegal actions taken
where the env gives a mask.

CPU-seconds: this process is the child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process of a run, forked
roles included, is reaped here once it ends; the run's CPU is the delta of getrusage(RUSAGE_CHILDREN) around it (its
whole waited-for process tree). This process's own polling is reported apart (`harness_cpu_s`).

    python bench/fair_run.py --envs CartPole-v1 --budget-s 60 --seeds 1 2 3 4 5 \
        --peer-python /work/peers-venv/bin/python --out bench/results/2026-11-27-fair-classic

The action kinds (bench/action_kinds.py; the service's virtualenv needs the box2d and bench-envs extras):

    python bench/fair_run.py --envs Taxi-v4 bench.action_kinds:ConnectFourVsRandom-v0 \
        bench.action_kinds:MultiDiscreteLunarLander-v3 --seeds 1 2 3 4 5 \
        --peer-python /work/peers-venv/bin/python --out bench/results/DATE-fair-actions

Breakout, 90 minutes a run, a side per sitting (`sb3-scaled` takes the env steps of the same --out's `sb3` run of
its seed); `ours` as a small machine's user runs it; every side scored by Atari's protocol (fair_eval's `protocol`):

    python bench/fair_run.py --envs ALE/Breakout-v5 --budget-s 5400 --seeds 1 --sides ours --out DIR \
        -- --preset breakout-small     # then --sides sb3, then sb3-scaled, with --peer-python

Where no DQN recipe is published for an env (the held-out families), or only the nearest (published.py's NEAREST,
which keep their observation handling), the peer gets a sweep of at most 4 settings (sb3_snapshots' NO_RECIPE_SWEEP):
a sitting of `--sides sb3 sb3-scaled --peer-recipe R` per setting R on seeds 1 and 2, each with an --out of its own
(the tables pool a directory's rows by side); the setting with the best median final score of either side (read
by bench/fair_sweep.py) is the peer's `--peer-recipe` in the env's headline sitting. A RECIPE_VARIANTS
`--peer-recipe` changes an env's own recipe.

Appends to <out>/runs.jsonl (one row per run, plus a `sitting` row) and <out>/scores.jsonl (one row per env, side,
seed and mark: the per-episode returns); never rewrites. Tables: bench/fair_tables.py. Kept-policy rows missing from
a sitting: `python bench/fair_run.py --backfill-kept --out DIR`.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench.fair_sides as fair_sides  # noqa: E402
from bench.common import git_commit, machine  # noqa: E402
from bench.fair_sides import OURS_FLAGS, PEER_ALGOS, SIDES  # noqa: E402
from bench.peers.sb3_snapshots import NO_RECIPE_SWEEP, RECIPE_VARIANTS  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36
SUMMARY_PREFIX = "summary: "


def become_subreaper() -> None:
    """Orphaned descendants of the runs are reparented here, so their CPU reaches RUSAGE_CHILDREN once reaped."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap_all(deadline_s: float = 120.0) -> int:
    """Waits for every remaining descendant (orphans reparented here); how many were reaped, -1 if some outlived it."""
    reaped, deadline = 0, time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            time.sleep(0.2)
        else:
            reaped += 1
    return -1  # their CPU-seconds are missing from the run's: the row says so


def cpu_seconds(who: int = resource.RUSAGE_CHILDREN) -> float:
    """User + system CPU-seconds of the reaped descendants so far (RUSAGE_CHILDREN), or of this process."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class OursSnapshots:
    """Polls a run's published weights on a thread; saves the latest at each mark (seconds since `started`)."""

    def __init__(self, directory: str, marks: list[float], started: float, root: str):
        self.directory, self.marks, self.started, self.root = directory, marks, started, root
        self.address: str | None = None
        self.ended = threading.Event()
        self.latest = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _env_steps(self) -> int:
        return sum(json.load(open(path, encoding="utf-8")).get("env_steps", 0)  # noqa: SIM115
                   for path in glob.glob(os.path.join(self.root, "actor-*", "progress.json")))

    def _run(self) -> None:
        """Until the run has ended: poll the weights and env steps, save each mark when its second comes."""
        from dqn.remote.weights_puller import WeightsPuller

        puller, index, env_steps = None, 0, 0
        with open(os.path.join(self.directory, "marks.jsonl"), "a", encoding="utf-8") as log:
            while not self.ended.is_set():
                if puller is None and self.address:
                    puller = WeightsPuller(self.address, timeout_s=5.0, min_interval_s=0.5)
                if puller is not None:
                    puller.request()
                    self.latest = puller.latest() or self.latest
                try:
                    env_steps = self._env_steps()
                except (OSError, ValueError):  # a progress file being replaced: the last count stands
                    pass
                while index < len(self.marks) and time.time() - self.started >= self.marks[index]:
                    self._save(index, time.time(), env_steps, log)
                    index += 1
                self.ended.wait(0.1)
            while index < len(self.marks):  # marks after the run's end keep its last weights
                self._save(index, time.time(), env_steps, log)
                index += 1
            self._save(len(self.marks), time.time(), env_steps, log, end=True)
        if puller is not None:
            puller.close()

    def _save(self, index: int, now: float, env_steps: int, log, end: bool = False) -> None:
        """Saves the latest weights as mark `index`; `end`: the run's last weights, after its last mark."""
        import numpy as np

        row = {"mark": index, "mark_s": None if end else self.marks[index], "at_s": round(now - self.started, 2),
               "after_end": self.ended.is_set() and not end, "run_end": end, "env_steps": env_steps}
        if self.latest is None:  # nothing published yet: the tables count "no policy" as random play
            row.update(train_step=None, file=None)
        else:
            name = f"mark-{index:02d}.npz"
            np.savez(os.path.join(self.directory, name), **{f"v{i}": v for i, v in enumerate(self.latest.variables)})
            row.update(train_step=self.latest.train_step, file=name)
        log.write(json.dumps(row) + "\n")
        log.flush()

    def join(self) -> None:
        self.ended.set()
        self._thread.join(timeout=60)


def run_ours(env_id: str, seed: int, budget_s: float, marks: list[float], snapshots: str, flags: list[str]) -> dict:
    """One `dqn-service local` run as a user runs it; its snapshots taken from the replay server."""
    root = tempfile.mkdtemp(prefix=f"fair-ours-{env_id.replace('/', '-')}-s{seed}-")  # MinAtar/..., MiniGrid/...
    # The snapshot client reads the run's replay server from this host's network: the run's roles must be on it
    # too (isolation changes nothing a run learns).
    command = [sys.executable, "-m", "launcher", "local", "--env-id", env_id, "--seed", str(seed),
               "--max-wall-time-s", f"{budget_s:g}", "--root-dir", root, "--isolate-network", "false", *flags]
    cpu_before, started = cpu_seconds(), time.time()
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watcher = OursSnapshots(snapshots, marks, started, root)
    lines = []
    for line in child.stdout:
        lines.append(line)
        if watcher.address is None and "replay at " in line:
            watcher.address = line.split("replay at ", 1)[1].split(",", 1)[0].strip()
    exit_code = child.wait()
    ended = time.time()
    load_end = os.getloadavg()
    watcher.join()
    reaped = reap_all()
    summary = next((line for line in reversed(lines) if line.startswith(SUMMARY_PREFIX)), "")
    fields = dict(part.split("=", 1) for part in summary[len(SUMMARY_PREFIX):].split() if "=" in part)
    return {"command": command, "root": root, "exit_code": exit_code, "orphans_reaped": reaped,
            "wall_s": round(ended - started, 2), "loadavg_end": load_end,
            "cpu_s": round(cpu_seconds() - cpu_before, 2), "solved": fields.get("solved") == "yes",
            "env_steps": int(fields.get("env_steps", 0)), "train_steps": int(fields.get("train_steps", 0)),
            "kept_recheck": kept_recheck(root), "summary": summary.strip(), "tail": "".join(lines[-5:])[-1500:]}


def kept_recheck(root: str) -> dict | None:
    """The service's own best re-checked evaluation (its evaluator's evals.jsonl), or None where nothing was re-checked.

    The kept policy ranks by its re-check where there is one: the highest `confirmed_return` is the kept one's.
    """
    path = os.path.join(root, "evaluator", "evals.jsonl")
    records = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
    checked = [r for r in records if r.get("confirmed_return") is not None and r["train_step"] > 0]
    if not checked:
        return None
    best = max(checked, key=lambda r: r["confirmed_return"])
    return {"train_step": best["train_step"], "average_return": best["average_return"],
            "confirmed_return": best["confirmed_return"], "confirm_episodes": best.get("confirm_episodes"),
            "evaluations": len(records), "rechecks": len(checked)}


def run_sb3(env_id: str, seed: int, budget_s: float, marks: list[float], snapshots: str, python: str,
            scaled_timesteps: int | None, algo: str = "dqn", recipe_of: str | None = None) -> dict:
    """One peer run under the peer's python (bench/peers/sb3_snapshots.py)."""
    started = time.time()
    command = [python, os.path.join(REPO, "bench", "peers", "sb3_snapshots.py"), "--env-id", env_id, "--algo", algo,
               "--seed", str(seed), "--budget-s", f"{budget_s:g}", "--started-epoch", f"{started:.3f}",
               "--snapshots", snapshots, "--marks", *[f"{m:g}" for m in marks]]
    command += ["--scaled-timesteps", str(scaled_timesteps)] if scaled_timesteps else []
    command += ["--recipe-of", recipe_of] if recipe_of and algo == "dqn" else []
    cpu_before = cpu_seconds()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    ended, load_end = time.time(), os.getloadavg()
    reaped = reap_all()
    last = next((json.loads(line) for line in reversed(result.stdout.splitlines()) if line.startswith("{")), {})
    return {"command": command, "exit_code": result.returncode, "orphans_reaped": reaped,
            "wall_s": round(ended - started, 2), "loadavg_end": load_end,
            "cpu_s": round(cpu_seconds() - cpu_before, 2), "env_steps": last.get("env_steps"),
            "train_steps": last.get("train_steps"), "scaled_timesteps": scaled_timesteps,
            "tail": (result.stdout + result.stderr)[-1500:]}


def evaluate(side: str, env_id: str, python: str, snapshots: str | None, root: str | None, context: dict,
             out: str, episodes: int) -> dict:
    """bench/fair_eval.py in its own process; its exit code and CPU-seconds."""
    scored = side if side in ("random", "ours-kept") else fair_sides.evaluator_side(side)
    command = [python, os.path.join(REPO, "bench", "fair_eval.py"), "--side", scored, "--env-id", env_id, "--episodes",
               str(episodes), "--context", json.dumps(context), "--out", out]
    command += ["--snapshots", snapshots] if snapshots else []
    command += ["--run-dir", root] if root else []
    cpu_before = cpu_seconds()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    reap_all()
    if result.returncode:
        print(f"evaluator failed ({side} {env_id}):\n{result.stdout[-1500:]}{result.stderr[-3000:]}", flush=True)
    return {"eval_exit_code": result.returncode, "eval_cpu_s": round(cpu_seconds() - cpu_before, 2)}


def append(path: str, row: dict) -> None:
    """Appends one JSON line (never rewrites what is there)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def backfill_kept(out: str, episodes: int) -> int:
    """Scores the kept policy of every ours run in `out` that has no ours-kept row yet (runs of an older harness)."""
    runs_path, scores_path = os.path.join(out, "runs.jsonl"), os.path.join(out, "scores.jsonl")
    with open(scores_path, encoding="utf-8") as handle:
        done = {(r["sitting"], r["env_id"], r["seed"], r["side"]) for r in map(json.loads, handle)
                if r["side"].endswith("-kept")}
    failed = 0
    with open(runs_path, encoding="utf-8") as handle:
        runs = [r for r in map(json.loads, handle) if r.get("kind") == "run" and r["side"] in OURS_FLAGS]
    for run in runs:
        kept = fair_sides.kept_side(run["side"])
        if (run["sitting"], run["env_id"], run["seed"], kept) in done or not os.path.isdir(run.get("root", "")):
            continue
        context = {**{key: run[key] for key in ("sitting", "env_id", "budget_s", "seed")}, "side": kept}
        failed += evaluate("ours-kept", run["env_id"], sys.executable, None, run["root"], context, scores_path,
                           episodes)["eval_exit_code"] != 0
    return failed


def env_sides(envs: list[str], sides: list[str] | None) -> dict[str, list[str]] | str:
    """Each env's sides (--sides, or its kind's), or why some side cannot run on some env."""
    chosen = {}
    for env_id in envs:
        kind = fair_sides.env_kind(env_id)
        own = [side for side in SIDES if side in (sides or fair_sides.KIND_SIDES[kind])]
        problems = [f"{env_id}: {problem}" for problem in (fair_sides.misfit(side, kind) for side in own) if problem]
        if problems:
            return "; ".join(problems)
        chosen[env_id] = own
    return chosen


def main(argv: list[str] | None = None) -> int:
    """Runs every env x seed x side of one sitting; appends runs and scores; exit 1 if any run or evaluation failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backfill-kept", action="store_true",
                        help="only score the kept policies of --out's service runs that have no kept row yet")
    parser.add_argument("--envs", nargs="+")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--budget-s", type=float, nargs="+", default=[240.0], help="one per env, or one for all")
    parser.add_argument("--sides", nargs="+", choices=SIDES, help="the same sides for every env (default: its kind's)")
    parser.add_argument("--peer-python", help="python of the peer virtualenv with SB3 (needed for the peer sides)")
    parser.add_argument("--marks", type=int, default=10, help="snapshots per run, every budget/marks s")
    parser.add_argument("--episodes", type=int, default=30, help="evaluation episodes per snapshot")
    parser.add_argument("--snapshot-dir", default=None, help="where snapshots go (default: a temp dir)")
    parser.add_argument("--out", required=True, help="the results directory (runs.jsonl, scores.jsonl)")
    parser.add_argument("--candidate-flags", default="",
                        help="the ours-candidate side's flags, one string, e.g. '--samples-per-insert 16'")
    parser.add_argument("--peer-recipe", choices=NO_RECIPE_SWEEP + tuple(RECIPE_VARIANTS),
                        help="sb3 and sb3-scaled: the sweep's setting (no recipe) or a variant of the env's recipe")
    parser.add_argument("ours_flags", nargs="*", help="after --: extra flags for ours (none for the headline)")
    args = parser.parse_args(argv)
    if args.backfill_kept:
        return 1 if backfill_kept(args.out, args.episodes) else 0
    if not args.envs:
        parser.error("--envs is required for a sitting")
    sides = env_sides(args.envs, args.sides)
    if isinstance(sides, str):
        parser.error(sides)
    candidate_flags = shlex.split(args.candidate_flags)
    if any("ours-candidate" in own for own in sides.values()) != bool(candidate_flags):
        parser.error("--candidate-flags and the side ours-candidate go together: give both or neither")
    if any(side in PEER_ALGOS for own in sides.values() for side in own) and not args.peer_python:
        parser.error("--peer-python is required for the peer sides (the peer virtualenv, never the service's)")
    if problem := fair_sides.peer_recipe_problem(sides, args.peer_recipe):
        parser.error(problem)
    runs_path, scores_path = os.path.join(args.out, "runs.jsonl"), os.path.join(args.out, "scores.jsonl")
    budgets = args.budget_s if len(args.budget_s) == len(args.envs) else args.budget_s[:1] * len(args.envs)
    earlier = {}  # (env, seed) -> sb3's run in an earlier sitting, for sb3-scaled without sb3 in this one
    for env_id, budget_s in zip(args.envs, budgets, strict=True):
        if "sb3-scaled" in sides[env_id] and "sb3" not in sides[env_id]:
            for seed in args.seeds:
                earlier[env_id, seed] = fair_sides.earlier_sb3_run(runs_path, env_id, seed, budget_s, args.peer_recipe)
                if not earlier[env_id, seed]:
                    parser.error(f"{env_id} seed {seed}: sb3-scaled scales to sb3's env steps, and {runs_path} has "
                                 f"no finished sb3 run of it at {budget_s:g} s: add the side sb3")
    become_subreaper()
    import dqn.remote.weights_puller  # noqa: F401 - TF and Reverb imported before any clock starts

    os.makedirs(args.out, exist_ok=True)
    snapshot_root = args.snapshot_dir or tempfile.mkdtemp(prefix="fair-snapshots-")
    sitting = {"kind": "sitting", "sitting": f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}",
               "commit": git_commit(), "argv": sys.argv, "machine": machine(), "time": time.time(),
               "eval_episodes": args.episodes, "service_python": sys.executable, "peer_python": args.peer_python,
               "sides": sides, "candidate_flags": candidate_flags, "peer_recipe": args.peer_recipe}
    append(runs_path, sitting)
    failed = 0
    for env_id, budget_s in zip(args.envs, budgets, strict=True):
        marks = [round(budget_s * (i + 1) / args.marks, 3) for i in range(args.marks)]
        base = {"sitting": sitting["sitting"], "env_id": env_id, "budget_s": budget_s}
        failed += evaluate("random", env_id, sys.executable, None, None, {**base, "seed": None}, scores_path,
                           args.episodes)["eval_exit_code"] != 0
        for seed in args.seeds:
            sb3_run = earlier.get((env_id, seed))
            sb3_env_steps = sb3_run and sb3_run["env_steps"]
            for side in fair_sides.side_order(sides[env_id], seed - 1):
                snapshots = os.path.join(snapshot_root, f"{env_id}-{side}-s{seed}-{uuid.uuid4().hex[:6]}")
                os.makedirs(snapshots)
                row = {"kind": "run", **base, "side": side, "seed": seed, "marks_s": marks, "snapshots": snapshots,
                       "machine": machine(), "commit": sitting["commit"], "time": time.time(),
                       "peer_recipe": args.peer_recipe if PEER_ALGOS.get(side) == "dqn" else None}
                harness_cpu = cpu_seconds(resource.RUSAGE_SELF)
                print(f"{env_id} seed {seed} {side}: training {budget_s:g} s (load {row['machine']['loadavg']})",
                      flush=True)
                if side in OURS_FLAGS:
                    flags = fair_sides.own_flags(side, candidate_flags) + args.ours_flags
                    row.update(run_ours(env_id, seed, budget_s, marks, snapshots, flags))
                elif side != "sb3-scaled" or sb3_env_steps:
                    row.update(run_sb3(env_id, seed, budget_s, marks, snapshots, args.peer_python,
                                       sb3_env_steps if side == "sb3-scaled" else None, PEER_ALGOS[side],
                                       args.peer_recipe), scaled_from_sitting=sb3_run and sb3_run["sitting"])
                    if side == "sb3":
                        sb3_env_steps = row.get("env_steps")
                else:
                    row.update(exit_code=None, error="sb3 reached no env steps in this sitting: nothing to scale to")
                row["harness_cpu_s"] = round(cpu_seconds(resource.RUSAGE_SELF) - harness_cpu, 2)
                if row.get("exit_code") == 0:
                    context = {**base, "seed": seed, "sitting": sitting["sitting"]}
                    python = sys.executable if side in OURS_FLAGS else args.peer_python
                    row.update(evaluate(side, env_id, python, snapshots, row.get("root"),
                                        {**context, "side": side}, scores_path, args.episodes))
                    if side in OURS_FLAGS:  # and the policy the run kept, what its user gets
                        kept = evaluate("ours-kept", env_id, python, None, row["root"],
                                        {**context, "side": fair_sides.kept_side(side)}, scores_path, args.episodes)
                        row.update(kept_eval_exit_code=kept["eval_exit_code"], kept_eval_cpu_s=kept["eval_cpu_s"])
                failed += row.get("exit_code") != 0 or row.get("eval_exit_code", 1) != 0
                append(runs_path, row)
                print(f"  exit {row.get('exit_code')}, wall {row.get('wall_s')} s, cpu {row.get('cpu_s')} s, env "
                      f"steps {row.get('env_steps')}, train steps {row.get('train_steps')}", flush=True)
    print(f"fair_run: appended to {runs_path} and {scores_path}; {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
