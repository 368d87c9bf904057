"""The fair harness's evaluation protocol per env, its equal-steps table and its scaled peer across sittings.

Real envs (ale-py's Breakout ships with the service), real files; SB3's side needs the peer virtualenv CI does not
install, so its Atari wrappers are checked by the harness's own sittings, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest

from bench import fair_eval, fair_run, fair_tables
from bench.action_kinds import CountIllegal
from bench.fair_sides import earlier_sb3_run
from evaluator.evaluate import ATARI_EVAL_EPSILON, ATARI_EVAL_FRAMES

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_atari_is_scored_as_the_services_evaluator_scores_it_and_other_envs_greedily_to_their_limit():
    frame_skip = 4  # the service's and SB3's Atari wrappers both act every 4 frames
    assert fair_eval.protocol("ALE/Breakout-v5") == (ATARI_EVAL_EPSILON, ATARI_EVAL_FRAMES // frame_skip)
    assert fair_eval.protocol("CartPole-v1") == (0.0, 500)


def test_random_play_on_breakout_plays_the_game_at_four_frames_an_action_within_the_atari_cap(tmp_path):
    out = tmp_path / "scores.jsonl"
    fair_eval.main(["--side", "random", "--env-id", "ALE/Breakout-v5", "--episodes", "2", "--out", str(out)])
    row = json.loads(out.read_text())
    assert row["episode_cap"] == 4_500 and row["eval_epsilon"] == 0.05 and len(row["returns"]) == 2, row
    env = fair_eval.random_play_env("ALE/Breakout-v5")
    assert env.unwrapped._frameskip == 1 and env.observation_space.shape == (84, 84), env  # the wrapper skips
    env.close()


def test_evaluation_epsilon_draws_the_same_random_actions_for_every_side():
    seeds = fair_eval.eval_seeds(3)

    def always(action):
        return lambda envs, observations, indices: [action] * len(indices)

    def cartpole():  # every side's env plays through CountIllegal
        return CountIllegal(gym.make("CartPole-v1"))

    # At epsilon 1 every action is the draw of the episode's own stream, whatever the side would have chosen.
    left = fair_eval.play(cartpole, always(0), seeds, 500, epsilon=1.0)
    right = fair_eval.play(cartpole, always(1), seeds, 500, epsilon=1.0)
    assert left == right
    greedy_left = fair_eval.play(cartpole, always(0), seeds, 500)
    assert greedy_left != left  # at epsilon 0 the side's own actions play


def score_row(side: str, seed: int, mark: int, env_steps: int, mean: float, sitting: str = "s1") -> dict:
    return {"kind": "score", "env_id": "E", "side": side, "seed": seed, "sitting": sitting, "mark": mark,
            "mark_s": 10.0 * (mark + 1), "env_steps": env_steps, "returns": [mean, mean]}


def test_ours_is_read_at_the_peers_own_env_steps_between_its_marks():
    rows = [score_row("ours", 1, 0, 1_000, 2.0), score_row("ours", 1, 1, 3_000, 6.0),
            score_row("sb3", 1, 0, 500, 1.0, "s2"), score_row("sb3", 1, 1, 2_000, 5.0, "s2"),
            score_row("sb3-scaled", 1, 0, 4_000, 3.0, "s2")]
    lines = fair_tables.equal_steps_lines("E", rows, random_score=0.0)
    # sb3 ends at 2,000 steps: halfway between ours' marks at 1,000 (2.0) and 3,000 (6.0).
    assert lines[0] == "| E | sb3 | 1 | 2,000 | 5.0 | 4.0 | 3,000 | 6.0 |", lines
    assert lines[1] == "| E | sb3-scaled | 1 | 4,000 | 3.0 | - | 3,000 | 6.0 |", lines  # ours never got there


def sb3_run(env_steps: int, seed: int = 1, exit_code: int = 0) -> dict:
    return {"kind": "run", "side": "sb3", "env_id": "CartPole-v1", "seed": seed, "budget_s": 60.0, "sitting": "s",
            "exit_code": exit_code, "env_steps": env_steps, "peer_recipe": None}


def test_the_scaled_peer_takes_the_latest_finished_sb3_run_of_its_seed_from_an_earlier_sitting(tmp_path):
    runs = tmp_path / "runs.jsonl"
    assert earlier_sb3_run(str(runs), "CartPole-v1", 1, 60.0, None) is None
    runs.write_text("".join(json.dumps(row) + "\n" for row in (
        {"kind": "sitting", "sitting": "s"}, sb3_run(1_000), sb3_run(2_000), sb3_run(9_000, exit_code=1),
        sb3_run(7_000, seed=2))))
    assert earlier_sb3_run(str(runs), "CartPole-v1", 1, 60.0, None)["env_steps"] == 2_000
    assert earlier_sb3_run(str(runs), "CartPole-v1", 1, 120.0, None) is None  # another budget
    assert earlier_sb3_run(str(runs), "CartPole-v1", 3, 60.0, None) is None


def test_atari_ids_are_found_without_importing_ale_py_first():
    # A fresh process: gymnasium 1.x knows no ALE/ id until ale-py is imported, which nothing here does first.
    probe = "from bench.fair_sides import env_kind; print(env_kind('ALE/Breakout-v5'))"
    found = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == "plain", found.stderr[-2000:]


def test_a_scaled_peer_without_sb3_anywhere_is_refused_before_any_row(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        fair_run.main(["--envs", "CartPole-v1", "--budget-s", "60", "--seeds", "1", "--sides", "ours", "sb3-scaled",
                       "--peer-python", "python", "--out", str(tmp_path)])
    assert refused.value.code == 2
    assert "no finished sb3 run" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_a_candidates_sitting_in_its_own_directory_is_compared_with_the_headlines_ours(tmp_path):
    headline, candidate = tmp_path / "headline", tmp_path / "candidate"
    for directory, side, sitting, base in ((headline, "ours", "s1", 1.0), (candidate, "ours-candidate", "s2", 5.0)):
        directory.mkdir()
        rows = [score_row(side, seed, mark, 1_000 * (mark + 1), base + seed) for seed in (1, 2) for mark in (0, 1)]
        rows.append({**score_row("random", 0, 0, 0, 0.0, sitting), "side": "random"})
        (directory / "scores.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    fair_tables.main([str(headline), "--beside", str(candidate), "--no-png"])
    tables = (headline / "tables.md").read_text()
    assert "--beside" in tables.splitlines()[2]
    # ours (2.0, 3.0) against the candidate (6.0, 7.0): the candidate's sitting joined this directory's rows.
    assert "| E | ours-candidate | final | 2/2 | 0.38 |" in tables, tables
    assert not (candidate / "tables.md").exists()


def test_a_sittings_line_names_the_boot_it_ran_in_so_runs_on_different_days_can_show_one_box(tmp_path):
    from bench.common import machine

    here = machine()
    with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as handle:
        assert here["boot_id"] == handle.read().strip()
    sitting = {"kind": "sitting", "sitting": "s1", "commit": "abc", "machine": here, "argv": ["fair_run.py"]}
    (tmp_path / "runs.jsonl").write_text(json.dumps(sitting) + "\n")
    line, = [line for line in fair_tables.machine_lines([str(tmp_path)], []) if line.startswith("- s1")]
    assert f"boot {here['boot_id'][:8]}" in line
    older = dict(sitting, machine={k: v for k, v in here.items() if k != "boot_id"})
    (tmp_path / "runs.jsonl").write_text(json.dumps(older) + "\n")
    assert "boot" not in fair_tables.machine_lines([str(tmp_path)], [])[2]
