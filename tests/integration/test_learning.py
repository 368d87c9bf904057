"""Learning with the real CLI and the default hyperparameters, on a bounded budget (the full solve is in bench/)."""

import json
import re
import subprocess
import sys

import pytest

from dqn.model.policy_export import play_exported_policy
from evaluator.evaluate import confirmation_seed
from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

SOLVED = 475  # CartPole-v1's reward_threshold
MAX_RETURN = 500  # CartPole-v1's longest episode


# A run with the defaults can still miss the threshold within a minute
# (bench/results/history/performance-learning-suite.md: none of 50 in five runs of seeds 1-10 at the current defaults, 3
# of 40 with an earlier reset rule), and the actors' timing makes a seed's run differ from one launch to the next; CI's
# box may also be slower. So the defaults get up to four runs: all four missing has a chance of about 1 in 10,000 at 1
# in 10, while defaults that do not learn CartPole fail every run. The run that solved is then checked in full.
SEEDS = (3, 4, 5, 6)
RUN_BUDGET_S = 90  # solves came at 8-25 s on an idle box (start-up included), the later ones after a fresh start
SUMMARY = re.compile(r"summary: solved=(\w+) wall_time=([\d.]+)s env_steps=(\d+) train_steps=(\d+)")


def _local_run(root, seed):
    result = subprocess.run(
        [sys.executable, "-m", "launcher", "local", "--root-dir", str(root), "--seed", str(seed),
         "--max-wall-time-s", str(RUN_BUDGET_S)],
        capture_output=True, text=True, cwd=REPO, timeout=RUN_BUDGET_S + 240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    evals = [json.loads(line) for line in (root / "evaluator" / "evals.jsonl").read_text().splitlines()]
    return result, evals


@pytest.mark.timeout(len(SEEDS) * (RUN_BUDGET_S + 120) + 300)
def test_local_defaults_solve_cartpole(tmp_path):
    attempts = []
    for seed in SEEDS:
        root = tmp_path / f"run-{seed}"
        result, evals = _local_run(root, seed)
        trained = [e for e in evals if e["train_step"] > 0]  # the initial network's evaluation never counts
        summary = SUMMARY.search(result.stdout)
        assert summary, result.stdout[-3000:]
        attempts.append((seed, max((e["average_return"] for e in trained), default=None), summary.group(0)))
        if summary.group(1) == "yes":
            break
    assert summary.group(1) == "yes", f"no run solved: (seed, best evaluation, summary) {attempts}"
    # The first evaluation (the initial network's) had not solved: the solve came from training, not from an env or
    # an evaluator that passes anything.
    assert evals[0]["average_return"] < SOLVED, evals
    # The solve is a re-check on 30 fresh episodes that reached the threshold, of an evaluation that came within one
    # standard error of it on its own 10.
    solving = next(e for e in trained if (e["confirmed_return"] or 0) >= SOLVED)
    assert solving["average_return"] + solving["standard_error"] >= SOLVED, solving
    # Only evaluations within one standard error of the threshold are re-checked: further below, a re-check would only
    # hold up the next evaluations.
    rechecked = [e for e in evals if e["confirmed_return"] is not None]
    assert all(e["average_return"] + e["standard_error"] >= SOLVED for e in rechecked), evals
    # Even when the solve comes before the first progress report, the summary counts the steps that led to it.
    assert int(summary.group(4)) >= solving["train_step"] > 0 and int(summary.group(3)) > 0, (summary.group(0), evals)
    # The evaluator leaves the best policy it saw, ranked by its re-check, as a SavedModel. Replayed on the
    # evaluator's episodes (seed + 99_991) and on the re-check's, it scores exactly what the evaluator recorded.
    best_eval = max((e for e in trained if e["confirmed_return"] is not None), key=lambda e: e["confirmed_return"])
    meta = json.loads((root / "evaluator" / "best_policy.json").read_text())
    assert meta == {key: best_eval[key] for key in ("train_step", "average_return", "confirmed_return")}
    # The evaluator plays the MLP in numpy and the SavedModel runs in TensorFlow: the two sum in different orders, so
    # where the two actions' Q-values tie to float32 precision an action can flip and one episode end differently
    # (seen once: 463 instead of 500 in a 30-episode replay). Hence at most one episode's worth of difference in the
    # total, not bit-for-bit equality; other weights would differ on many episodes.
    replayed, illegal = play_exported_policy(str(root / "evaluator" / "best_policy"), "CartPole-v1", episodes=10,
                                             seed=seed + 99_991)
    assert illegal == 0  # CartPole has no mask: nothing is ever forbidden
    assert abs(replayed.sum() - 10 * meta["average_return"]) <= MAX_RETURN, (replayed, meta)
    fresh, _ = play_exported_policy(str(root / "evaluator" / "best_policy"), "CartPole-v1", episodes=30,
                                    seed=confirmation_seed(seed, meta["train_step"]))
    assert abs(fresh.sum() - 30 * meta["confirmed_return"]) <= MAX_RETURN, (fresh, meta)
    # `dqn-service policy-check` plays it on the same episodes through the CLI and reports the same figures.
    check = subprocess.run([sys.executable, "-m", "launcher", "policy-check", str(root / "evaluator" / "best_policy"),
                            "--episodes", "10", "--seed", str(seed + 99_991)],
                           capture_output=True, text=True, cwd=REPO, timeout=300)
    reported = json.loads(check.stdout.strip().splitlines()[-1])
    assert reported["episodes"] == 10 and reported["min_return"] == replayed.min(), check.stdout + check.stderr
    assert reported["mean_return"] == pytest.approx(replayed.mean(), abs=0.05)
