"""Masked and multi-discrete envs learn with the defaults (`dqn-service local --env-id module:Id`, nothing else).

Each run must solve its env (tests/action_envs.py: a forbidden action ends the episode at -1), and every role's
illegal-action counter must exist and stay 0: the actors' (warm-up, epsilon-greedy, held random actions), the
evaluator's, the learner's target's, and the exported best policy's replayed on fresh episodes. The counters are
read where an operator reads them: the summary line, the progress files `dqn-service status` prints, TensorBoard.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from dqn.model.policy_export import policy_check
from launcher.status import print_run_progress
from tests.conftest import REPO
from tests.events import latest_scalars
from tests.integration.test_user_envs import ROLES_EXIT_0, summary

pytestmark = pytest.mark.integration

ROLES = ("actor-0", "actor-1", "learner", "evaluator")
#: Where each role writes its counter to TensorBoard.
TAGS = {"actor-0": "actor/illegal_actions", "actor-1": "actor/illegal_actions",
        "learner": "charts/illegal_target_actions", "evaluator": "eval/illegal_actions"}


def local(tmp_path, env_id: str) -> subprocess.CompletedProcess:
    """`dqn-service local` on tests.action_envs:<env_id> with only a wall-time cap (each solves in seconds)."""
    command = [sys.executable, "-m", "launcher", "local", "--env-id", f"tests.action_envs:{env_id}",
               "--root-dir", str(tmp_path / "run"), "--max-wall-time-s", "90"]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def check_learns_and_counts_no_illegal_action(tmp_path, output: str, runs_in: str, source: str, capsys,
                                              replayed_return: float = 19.0) -> None:
    root = tmp_path / "run"
    figures = summary(output)
    assert figures["solved"] == "yes" and figures["illegal_actions"] == "0", output
    assert ROLES_EXIT_0 in output, output
    config = json.loads((root / "config.json").read_text())
    assert config["action_mask"] == source, config
    assert f"action_mask auto: {source} (" in output, output
    for role in ROLES:
        progress = json.loads((root / role / "progress.json").read_text())
        assert progress["illegal_actions"] == 0, (role, progress)
        assert latest_scalars(root / role)[TAGS[role]] == 0, role
    capsys.readouterr()
    print_run_progress(str(root))
    shown = capsys.readouterr().out
    assert len(re.findall(r"illegal actions 0", shown)) == len(ROLES), shown
    replayed = policy_check(str(root / "evaluator" / "best_policy"), None, episodes=20, seed=123)
    assert replayed["illegal_actions"] == 0 and replayed["mean_return"] >= replayed_return, replayed
    assert f"policy in {runs_in}" in (root / "logs" / "actor-0.log").read_text()


@pytest.mark.parametrize(("env", "runs_in", "source"), [
    ("DictMask-v0", "numpy", "observation"),  # the Q-network reads the observation part: the numpy mirror runs it
    ("InfoMask-v0", "numpy", "info"),
    ("SmallMultiDiscrete-v0", "numpy", "info"),  # 12 combinations, one Q-value each; a per-dimension info mask
    ("LargeMultiDiscrete-v0", "a graph call", "observation"),  # 4096 combinations: the branching Q-network
])
def test_a_masked_or_multi_discrete_env_learns_with_the_defaults_and_takes_no_illegal_action(
        tmp_path, env, runs_in, source, capsys):
    result = local(tmp_path, env)
    check_learns_and_counts_no_illegal_action(tmp_path, result.stdout + result.stderr, runs_in, source, capsys)


def test_a_mask_that_allows_nothing_is_an_env_fault_and_the_run_goes_on(tmp_path, capsys):
    result = local(tmp_path, "AllFalseMask-v0")
    output = result.stdout + result.stderr
    # Replayed, an episode that a fault cuts short counts with its partial return (the evaluator leaves it out).
    check_learns_and_counts_no_illegal_action(tmp_path, output, "numpy", "observation", capsys, replayed_return=15.0)
    figures = summary(output)
    assert int(figures["env_restarts"]) > 0 and figures["role_restarts"] == "0", output
    actor_log = (tmp_path / "run" / "logs" / "actor-0.log").read_text() + \
        (tmp_path / "run" / "logs" / "actor-1.log").read_text()
    assert "failed in step (NoValidAction: the mask of valid actions allows no action" in actor_log
    assert "Traceback" not in actor_log


def test_an_action_space_too_large_for_both_layouts_is_refused_at_start(tmp_path):
    result = local(tmp_path, "HugeMultiDiscrete-v0")
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    error_lines = [line for line in output.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and "2000 outputs of a branching Q-network" in error_lines[0], output
    assert "discretize coarser or act on fewer dimensions" in error_lines[0], output
    assert not (tmp_path / "run" / "logs").exists()  # no role was started
