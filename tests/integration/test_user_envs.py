"""Envs a user brings, run as a user would (`dqn-service local --env-id module:Id`, defaults otherwise).

Every observation kind learns its small task (tests/user_envs.py: reward 1 when the action matches a bit that only
the observation shows); NaN observations or rewards and a step that never returns are env faults, counted, and
the run goes on with every role alive.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration

KINDS = ["BoolGrid-v0", "FloatGrid-v0", "ChannelsFirst-v0", "StateIndex-v0", "MultiDiscreteObs-v0",
         "MultiBinaryObs-v0", "DictObs-v0", "TupleObs-v0"]
ROLES_EXIT_0 = "exit codes: replay-server=0, learner=0, actor-0=0, actor-1=0, evaluator=0"


def local(tmp_path, env_id: str, *flags: str, timeout_s: float = 240) -> str:
    """`dqn-service local` on `tests.user_envs:<env_id>` (the tests package importable, as a user's module is)."""
    command = [sys.executable, "-m", "launcher", "local", "--env-id", f"tests.user_envs:{env_id}",
               "--root-dir", str(tmp_path / "run"), *flags]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=timeout_s,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    return result.stdout + result.stderr


def summary(output: str) -> dict[str, str]:
    line = next(line for line in output.splitlines() if line.startswith("summary:"))
    return dict(re.findall(r"(\w+)=(\S+)", line))


@pytest.mark.parametrize("name", KINDS)
def test_every_observation_kind_learns_with_the_defaults(tmp_path, name):
    output = local(tmp_path, name, "--max-wall-time-s", "120")
    assert summary(output)["solved"] == "yes", output
    assert ROLES_EXIT_0 in output, output
    # Random play matches the bit half the time (about 10 of 20); the solving policy is kept, well above it.
    assert 5 < float(summary(output)["random_play_return"]) < 15 and "below random play" not in output, output


def test_a_kept_policy_below_random_play_is_named_in_the_summary(tmp_path):
    # Alternate-v0 pays for switching actions behind an observation that never changes: random play scores about 10
    # of 20, any greedy policy (one action for ever) at most 1, so whatever the run keeps is below random play.
    output = local(tmp_path, "Alternate-v0", "--max-train-steps", "300", "--max-wall-time-s", "120")
    figures = summary(output)
    assert 7 < float(figures["random_play_return"]) < 13, output
    warning = next((line for line in output.splitlines() if line.startswith("warning: the kept policy")), "")
    assert "below random play's" in warning, output
    assert float(warning.split(" scores ")[1].split()[0]) <= 1.0, warning
    assert ROLES_EXIT_0 in output, output
    evaluator_log = (tmp_path / "run" / "logs" / "evaluator.log").read_text()
    assert "random play: average return" in evaluator_log and "below random play's" in evaluator_log


def test_a_grid_of_category_codes_is_read_as_codes(tmp_path):
    # The bit hides in the parity of a code: one-hot (image_encoding auto) solves it within seconds; divided by
    # 255 (`--image-encoding scaled`) it took 97 s on a 2-core box.
    output = local(tmp_path, "CodeGrid-v0", "--max-wall-time-s", "30")
    assert summary(output)["solved"] == "yes", output
    assert ROLES_EXIT_0 in output, output


@pytest.mark.parametrize("name", ["NaNCartPole-v0", "NaNRewardCartPole-v0"])
def test_non_finite_observations_and_rewards_are_env_faults(tmp_path, name):
    output = local(tmp_path, name, "--max-train-steps", "800", "--target-return", "1e9", "--max-wall-time-s", "150")
    figures = summary(output)
    assert int(figures["env_restarts"]) > 0 and figures["role_restarts"] == "0", output
    assert int(figures["train_steps"]) >= 800, output
    assert ROLES_EXIT_0 in output, output
    actor_log = (tmp_path / "run" / "logs" / "actor-0.log").read_text()
    assert "non-finite" in actor_log and "Traceback" not in actor_log
    # The run stopped only once the evaluator had scored the last weights, or weights too close to them (less than
    # eval_interval, 100) to be evaluated again.
    evaluations = (tmp_path / "run" / "evaluator" / "evals.jsonl").read_text().splitlines()
    assert max(json.loads(line)["train_step"] for line in evaluations if line.strip()) > 800 - 100


def test_a_step_that_never_returns_does_not_stall_the_actors(tmp_path):
    output = local(tmp_path, "OftenHangingCartPole-v0", "--env-call-timeout-s", "1", "--max-train-steps", "500",
                   "--target-return", "1e9",
                   "--max-wall-time-s", "150")
    figures = summary(output)
    assert int(figures["env_restarts"]) > 0 and figures["role_restarts"] == "0", output
    assert int(figures["train_steps"]) >= 500, output  # training went on past the hangs
    assert ROLES_EXIT_0 in output, output  # and every role stopped on SIGTERM, none had to be killed
    actor_log = (tmp_path / "run" / "logs" / "actor-0.log").read_text()
    assert "did not return within 1 s" in actor_log


def test_a_room_whose_useless_actions_change_nothing_is_learned_with_advantage_learning(tmp_path):
    # Three of its five actions change nothing and earn nothing (as MiniGrid's pick up, drop and done): with
    # `--action-gap-alpha 0.9` the greedy policy walks to the goal within seconds. With `--action-gap-alpha 0`
    # this seed took 30.8 s on a 2-core box (the idle actions' values sit within 1 % of the best one's).
    output = local(tmp_path, "IdleRoom-v0", "--seed", "2", "--max-wall-time-s", "20", "--action-gap-alpha", "0.9")
    assert "action_gap_alpha auto" not in output, output  # an explicit setting: nothing decides it from the env
    assert summary(output)["solved"] == "yes", output
    assert ROLES_EXIT_0 in output, output
    written = json.loads((tmp_path / "run" / "learner" / "config.json").read_text())
    assert written["action_gap_alpha"] == 0.9
