"""Every bench/ script that uses product code, run through its own entry on a tiny budget.

A benchmark runs rarely, so a product change that breaks one (a changed signature, a renamed flag, another output)
would otherwise show only when someone next runs it. Each smoke run takes seconds on an env CI installs (CartPole,
Breakout) and checks what the script printed or wrote. A script that cannot run here fails its test: nothing skips.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "bench"
PRODUCT = {"dqn", "actor", "learner", "evaluator", "replay_server", "launcher"}


def bench_file(name: str) -> Path:
    """The file of bench module `name`, dotted below bench/ (`fair_run`, `peers.sb3_snapshots`)."""
    return BENCH / f"{name.replace('.', '/')}.py"


def bench_imports(name: str) -> set[str]:
    """Modules bench/<name>.py imports anywhere in its source; its sibling bench files as `bench.<name>`."""
    modules = set()
    for node in ast.walk(ast.parse(bench_file(name).read_text())):
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found = ([f"bench.{alias.name}" for alias in node.names] if node.module == "bench" else [node.module])
        else:
            continue
        modules |= {f"bench.{m}" if (BENCH / f"{m}.py").is_file() else m for m in found}  # variants.py's sibling
    return modules


def uses_product_code(name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether bench/<name>.py imports a product package, itself or through the bench modules it imports."""
    modules = bench_imports(name)
    if any(module.split(".")[0] in PRODUCT for module in modules):
        return True
    siblings = {module.removeprefix("bench.") for module in modules
                if module.startswith("bench.") and bench_file(module.removeprefix("bench.")).is_file()} - seen - {name}
    return any(uses_product_code(sibling, seen | {name}) for sibling in siblings)


def scripts() -> set[str]:
    """bench/*.py files that run as scripts (the rest are helpers they import)."""
    return {path.stem for path in BENCH.glob("*.py") if '__name__ == "__main__"' in path.read_text()}


def numbers(line: str) -> list[float]:
    """The numbers of a table row, thousands separators and units dropped."""
    return [float(token.replace(",", "").rstrip("x%")) for token in line.split()
            if re.fullmatch(r"-?[\d,]+(\.\d+)?[x%]?", token)]


def json_lines(stdout: str) -> list[dict]:
    """The lines of `stdout` that are JSON objects."""
    return [json.loads(line[line.index("{"):]) for line in stdout.splitlines() if "{" in line and line.endswith("}")]


def rows_starting(stdout: str, pattern: str) -> list[str]:
    """Lines that match `pattern` at their start (after spaces)."""
    return [line for line in stdout.splitlines() if re.match(pattern, line.strip())]


def check_actor_throughput(out: str, _: Path) -> None:
    rows = rows_starting(out, r"16 ")  # num_envs, ceiling, ours trans/s and steps/s, graph, stock items and steps
    assert len(rows) == 1 and all(value > 0 for value in numbers(rows[0])[:7]), out
    assert "target = 20,000 env steps/s" in out, out


def check_action_heads(out: str, _: Path) -> None:
    rows = rows_starting(out, r"(flat|branching) ")  # head, size, outputs, SGD steps/s, rounds
    assert [row.split()[:3] for row in rows] == [["flat", "4", "4"], ["branching", "2x3", "6"]], out
    assert all(float(row.split()[3]) > 0 for row in rows), out


def check_book_loop(out: str, _: Path) -> None:
    run = json_lines(out)[-1]
    assert run["train_steps"] == 30 and [step for step, _ in run["evals"]] == [15, 30], run
    assert run["best_eval_return"] > 0 and run["solved"] is False, run


def check_breakout(out: str, _: Path) -> None:
    assert "replay bytes" not in out, out  # that part was left out (its servers cost most; replay_bytes measures so)
    for prefix in ("actor env steps/s, conv policy, 1 envs", "learner SGD steps/s, conv net, float32, batch 16, fixed",
                   "learner SGD steps/s, conv net, float32, batch 16, fed from replay"):
        lines = [line for line in out.splitlines() if line.startswith(prefix)]
        assert len(lines) == 1 and numbers(lines[0].split(":")[1])[0] > 0, (prefix, out)


def check_capacity(out: str, _: Path) -> None:
    row, = json_lines(out)  # the server's own count of items inserted, per second
    assert row["mode"] == "insert" and row["clients"] == 1 and row["rate"] > 0 and row["per_core"] > 0, row
    assert re.search(r"cartpole +insert +1 ", out) and "server and clients on loopback" in out, out


def check_eval_protocol(out: str, _: Path) -> None:
    greedy, atari = json_lines(out)
    # Weights that never press FIRE: the greedy protocol waits out the cap and scores nothing.
    assert greedy["average_episode_length"] == 50 and greedy["average_return"] == 0, greedy
    assert greedy["episodes"] == atari["episodes"] == 1 and atari["average_episode_length"] <= 50, atari


def check_learner_throughput(out: str, _: Path) -> None:
    rates = [line for line in out.splitlines() if line.endswith("SGD steps/s")]
    assert len(rates) >= 6 and all(numbers(line)[-1] > 0 for line in rates), out
    assert len(re.findall(r"^ratio .*: \d+\.\d\d$", out, re.MULTILINE)) == 4, out  # 3 inputs, 2 steps per call


def check_learning_sim(out: str, _: Path) -> None:
    row = json_lines(out)[-1]
    assert row["seed"] == 1 and row["resets_at"] == [100], row  # the forced reset ran the learner's reset
    assert {"solved_at_train_step", "best_eval_return", "env_steps", "max_mean_q", "rechecks"} <= set(row), row
    assert re.search(r"solved [01]/1 within 200 train steps", out), out


def check_replay_bytes(out: str, _: Path) -> None:
    rows = rows_starting(out, r"bool ")  # kind, env, stored dtype, raw bytes, bytes/transition (RSS growth), ratio
    assert len(rows) == 1 and rows[0].split()[2] == "uint8" and numbers(rows[0])[0] == 400, out


def check_scaling(out: str, _: Path) -> None:
    rows = rows_starting(out, r"1 +16 ")  # actors, num_envs, trans/s total, per actor, ...
    assert len(rows) == 1 and numbers(rows[0])[2] > 0 and "bytes per stored" not in out, out


def check_soak(out: str, _: Path) -> None:
    assert "CRASHED" not in out and re.search(r"kills=0 restarts=0 final_train_step=\d+", out), out
    samples = json.loads(Path(re.search(r"per role: (\S+)", out).group(1)).read_text())
    assert set(samples) == {"replay-server", "learner", "actor-0", "actor-1", "evaluator"}, samples.keys()
    assert all(samples.values()), samples


def check_learning_suite(out: str, tmp: Path) -> None:
    row, = json.loads((tmp / "suite.json").read_text())["rows"]
    assert row["env_id"] == "CartPole-v1" and row["threshold"] == 475.0 and row["error"] is None, row
    assert isinstance(row["train_steps"], int) and "CartPole-v1 [defaults]: solved" in out, out


def check_breakout_learning(out: str, tmp: Path) -> None:
    row, = json.loads((tmp / "breakout.json").read_text())["rows"]
    assert row["side"] == "ours" and row["preset"] == "breakout-small" and row["exit_code"] == 0, row
    assert row["variant"] == "smoke" and row["flags"] == ["--num-envs", "16"], row
    assert rows_starting(out, r"\| ours \(smoke\) \| 1 \|"), out


@dataclass(frozen=True)
class Smoke:
    """A script's tiny-budget flags (`{tmp}`: the test's directory) and the check of its output."""

    args: tuple[str, ...]
    check: Callable[[str, Path], None]


def check_fair_run(_: str, tmp: Path) -> None:
    """The harness's `ours` side end to end: run rows, snapshots read from the replay server, scores, tables."""
    runs = [json.loads(line) for line in (tmp / "fair" / "runs.jsonl").read_text().splitlines()]
    sitting, run = runs
    assert sitting["kind"] == "sitting" and sitting["machine"]["nproc"] >= 1, sitting
    assert run["side"] == "ours" and run["exit_code"] == 0 and run["eval_exit_code"] == 0, run
    assert run["cpu_s"] > 1 and run["env_steps"] > 0 and "--target-return" not in run["command"], run
    scores = [json.loads(line) for line in (tmp / "fair" / "scores.jsonl").read_text().splitlines()]
    random_play, *ours, kept = scores
    assert random_play["side"] == "random" and len(random_play["returns"]) == 2, random_play
    assert kept["side"] == "ours-kept" and (kept["returns"] is None or len(kept["returns"]) == 2), kept
    assert [row["mark"] for row in ours] == [0, 1, 2] and ours[-1]["run_end"], ours
    # The run's last weights came from its replay server through the product's reader and were scored.
    assert ours[-1]["train_step"] is not None and len(ours[-1]["returns"]) == 2, ours[-1]
    assert {row["eval_seed_first"] for row in scores} == {1_000_000}, scores
    importlib.import_module("bench.fair_tables").main([str(tmp / "fair"), "--no-png"])
    tables = (tmp / "fair" / "tables.md").read_text()
    assert "## CartPole-v1 (10 s per run; random play" in tables and "| ours | 1 | " in tables, tables


def check_fair_eval(_: str, tmp: Path) -> None:
    row = json.loads((tmp / "random.jsonl").read_text())
    assert row["side"] == "random" and len(row["returns"]) == 3 and row["episode_cap"] == 500, row


SMOKES = {
    "action_heads": Smoke(("--flat", "4", "--branching", "2x3", "--seconds", "0.2", "--rounds", "1", "--batch-size",
                           "16", "--fc-layer-params", "8"), check_action_heads),
    "actor_throughput": Smoke(("--seconds", "0.4", "--num-envs", "16", "--stock-seconds", "0.2", "--warmup-s", "0.5"),
                              check_actor_throughput),
    "book_loop": Smoke(("--budget-s", "200", "--max-train-steps", "30", "--eval-interval", "15"), check_book_loop),
    "breakout": Smoke(("--part", "actor,learner", "--seconds", "0.3", "--items", "300", "--num-envs", "1",
                       "--compute-dtypes", "float32", "--batch-sizes", "16"), check_breakout),
    "capacity": Smoke(("--loopback", "--clients", "1", "--seconds", "1", "--env", "cartpole", "--mode", "insert"),
                      check_capacity),
    "eval_protocol": Smoke(("--episodes", "1", "--max-episode-steps", "50"), check_eval_protocol),
    "learner_throughput": Smoke(("--seconds", "0.3", "--batch-size", "16", "--fc-layer-params", "8",
                                 "--envs-per-item", "4", "--rounds", "0",
                                 "--steps-per-call", "2", "--fill", "2000"), check_learner_throughput),
    "learning_sim": Smoke(("--seeds", "1", "--steps", "200", "--reset-at", "100", "--", "--eval-interval", "100",
                           "--replay-min-size", "200", "--warmup-steps", "100"), check_learning_sim),
    "replay_bytes": Smoke(("--transitions", "256", "--warmup", "64", "--kinds", "bool"), check_replay_bytes),
    "scaling": Smoke(("--actors", "1", "--seconds", "1", "--num-envs", "16", "--items", "0"), check_scaling),
    "soak": Smoke(("--minutes", "0.15", "--kill-every-s", "1000"), check_soak),
    # The service's side on CartPole (or the preset CI has), no PNGs (matplotlib is a bench extra), budgets so short
    # that the runs end during start-up: what is checked is their command lines and the parsing of their summaries.
    "learning_suite": Smoke(("--envs", "CartPole-v1", "--seeds", "1", "--budget-s", "5", "--json", "{tmp}/suite.json"),
                            check_learning_suite),
    # The fair harness's `ours` side, its evaluator and its tables (CI has no peer virtualenv for the SB3 sides).
    "fair_run": Smoke(("--envs", "CartPole-v1", "--budget-s", "10", "--seeds", "1", "--sides", "ours", "--marks", "2",
                       "--episodes", "2", "--out", "{tmp}/fair"), check_fair_run),
    "fair_eval": Smoke(("--side", "random", "--env-id", "CartPole-v1", "--episodes", "3", "--out",
                        "{tmp}/random.jsonl"), check_fair_eval),
    # Half the preset's envs per actor: making 32 Atari envs on a crowded box can outlast the roles' stop deadline.
    "breakout_learning": Smoke(("--sides", "ours", "--seeds", "1", "--minutes", "0.1", "--json",
                                "{tmp}/breakout.json", "--png-dir", "", "--variant", "smoke", "--", "--num-envs", "16"),
                               check_breakout_learning),
}
#: Pure scripts run in this process through their `main(argv)`: (argv, check of the printed rows).
IN_PROCESS = {
    "auto_settings": (["--envs", "CartPole-v1", "Taxi-v4"],
                      lambda out: rows_starting(out, r"\| (CartPole|Taxi)") == [
                          "| CartPole-v1 | no | 1 | scaled | 4.0 | none |",
                          "| Taxi-v4 | no | 1 | scaled | 4.0 | **info** |"]
                      and "| fired on (designed on / held out, of 2 / 0) | | 0 / 0 | 0 / 0 | 0 / 0 | 1 / 0 |"
                      in out),
    "hidden_state": (["--envs", "CartPole-v1", "--seeds", "0"],
                     lambda out: [row.split()[8] for row in rows_starting(out, "CartPole-v1 ")] == ["1"]),
}


@pytest.mark.integration
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(SMOKES))
def test_bench_script_runs_on_a_tiny_budget(name, tmp_path):
    args = [arg.format(tmp=tmp_path) for arg in SMOKES[name].args]
    result = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), *args], cwd=REPO, capture_output=True,
                            text=True, timeout=540)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    SMOKES[name].check(result.stdout, tmp_path)


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_pure_bench_script_runs_on_a_tiny_budget(name, capsys):
    argv, check = IN_PROCESS[name]
    importlib.import_module(f"bench.{name}").main(argv)
    out = capsys.readouterr().out
    assert check(out), out


def test_every_bench_script_that_uses_product_code_has_a_smoke_run():
    names = {path.stem for path in BENCH.glob("*.py")}
    using = {name for name in scripts() if uses_product_code(name)}
    # The detection itself: a direct import, one through a bench helper, and a script that only runs others.
    assert {"learning_sim", "soak", "learning_suite"} <= using and "run_all" not in using, using
    smoked = set(SMOKES) | set(IN_PROCESS)
    assert not using - smoked, f"bench scripts using product code without a smoke run here: {sorted(using - smoked)}"
    assert smoked <= scripts(), f"smoke entries for scripts that are gone: {sorted(smoked - scripts())}"
    # A helper that uses product code is run by a smoked script that imports it.
    helpers = {name for name in names - scripts() if uses_product_code(name)}
    unrun = {helper for helper in helpers if not any(f"bench.{helper}" in bench_imports(s) for s in smoked)}
    assert not unrun, f"bench helpers using product code that no smoked script imports: {sorted(unrun)}"
