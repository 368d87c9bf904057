"""bench/learning_suite.py: best return of trained weights by each checkpoint, from an evals.jsonl."""

import json

from bench.learning_suite import best_by, reward_threshold, suite_table


def test_best_by_counts_trained_weights_within_each_checkpoint(tmp_path):
    evaluator = tmp_path / "evaluator"
    evaluator.mkdir()
    started = 1000.0
    records = [(0, 5, 200.0),      # the untrained network: never counted
               (100, 30, -400.0), (200, 70, -150.0), (300, 100, -300.0), (400, 200, -90.0)]
    evaluator.joinpath("evals.jsonl").write_text("".join(
        json.dumps({"train_step": step, "time": started + seconds, "average_return": value,
                    **({"reset_requested": True} if step == 300 else {})}) + "\n"
        for step, seconds, value in records))
    assert best_by(str(tmp_path), started, (20, 60, 120, 240)) == {
        "best_by_20s": None, "best_by_60s": -400.0, "best_by_120s": -150.0, "best_by_240s": -90.0,
        "resets_at": [300], "curve": [(30.0, -400.0), (70.0, -150.0), (100.0, -300.0), (200.0, -90.0)]}


def test_best_by_without_evaluations(tmp_path):
    assert best_by(str(tmp_path), 0.0, (60,)) == {"best_by_60s": None, "resets_at": [], "curve": []}


def test_thresholds_are_the_envs_own():
    assert (reward_threshold("CartPole-v1"), reward_threshold("Acrobot-v1")) == (475.0, -100.0)


def test_a_users_module_env_id_is_imported_for_its_threshold():
    assert reward_threshold("bench.pomdp_envs:CartPoleNoVelocity-v0") == 475.0


def suite_row(seed, seconds, holds, resets=()):
    return {"env_id": "MountainCar-v0", "flags": "", "seed": seed, "solved": seconds is not None,
            "time_to_threshold_s": seconds, "check_holds": holds, "resets_at": list(resets)}


def test_suite_table_counts_unsolved_runs_as_slowest_and_names_fresh_starts():
    rows = [suite_row(1, 40.9, True), suite_row(2, None, False), suite_row(3, 116.8, True, [20900]),
            suite_row(4, 127.2, False, [22300]), suite_row(5, 31.6, True, [100, 200])]
    assert suite_table([{"budget_s": 240.0, "rows": rows}]).splitlines()[2] == (
        "| MountainCar-v0, 240 s | 4/5 | 40.9, —, 116.8, 127.2, 31.6 s | 116.8 s | seeds 3, 4 once; seed 5 twice "
        "| 3/5 |")


def test_suite_table_median_beyond_the_budget_when_most_runs_fail():
    rows = [suite_row(1, 50.0, True), suite_row(2, None, False), suite_row(3, None, False)]
    assert "| 1/3 | 50.0, —, — s | > 180 s | none | 1/3 |" in suite_table([{"budget_s": 180.0, "rows": rows}])
