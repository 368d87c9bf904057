"""The peer sweep's table and pick, from raw rows of the fair harness (bench/fair_sweep.py)."""

from __future__ import annotations

import json

from bench import fair_sweep


def write_sitting(directory, finals: dict[str, list[float]], seeds=(1, 2), first: float = 0.0) -> None:
    """A results directory whose peer sides score `first` at mark 0 and finals[side][i] at mark 1 for seed i."""
    directory.mkdir(parents=True)
    rows = [{"kind": "score", "env_id": "E", "side": "random", "seed": 0, "sitting": "s", "mark": 0, "mark_s": 10.0,
             "env_steps": 0, "returns": [0.0]}]
    for side, values in finals.items():
        for seed, final in zip(seeds, values, strict=True):
            for mark, score in ((0, first), (1, final)):
                rows.append({"kind": "score", "env_id": "E", "side": side, "seed": seed, "sitting": f"s{seed}",
                             "mark": mark, "mark_s": 10.0 * (mark + 1), "env_steps": 100, "returns": [score]})
    (directory / "scores.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_the_setting_with_the_best_side_is_picked_and_a_borrowed_recipe_counts_its_sweep_seeds_only(tmp_path):
    write_sitting(tmp_path / "sweep" / "MountainCar-v0", {"sb3": [4.0, 6.0], "sb3-scaled": [1.0, 1.0]})
    write_sitting(tmp_path / "sweep" / "sb3-defaults", {"sb3": [1.0, 1.0], "sb3-scaled": [7.0, 9.0]})
    # The headline sitting has seeds 1-5; its seed 3 would lift its median above every other setting.
    write_sitting(tmp_path / "headline", {"ours": [50.0] * 3, "sb3": [2.0, 2.0, 99.0], "sb3-scaled": [2.0] * 3},
                  seeds=(1, 2, 3))
    fair_sweep.main([str(tmp_path / "sweep"), "--setting", f"CartPole-v1={tmp_path / 'headline'}",
                     "--stands", "CartPole-v1"])
    text = (tmp_path / "sweep" / "sweep.md").read_text()
    assert "| CartPole-v1 | 2.0 [2.0, 2.0] | 2.0 [2.0, 2.0] |" in text, text
    assert "**The pick: sb3-defaults** (the best median final score of either side)." in text, text


def test_a_tie_on_the_final_score_goes_to_the_area_and_a_full_tie_keeps_the_headlines_recipe(tmp_path):
    write_sitting(tmp_path / "a" / "MountainCar-v0", {"sb3": [0.0, 0.0], "sb3-scaled": [0.0, 0.0]}, first=0.4)
    write_sitting(tmp_path / "a" / "sb3-defaults", {"sb3": [0.0, 0.0], "sb3-scaled": [0.0, 0.0]})
    fair_sweep.main([str(tmp_path / "a")])
    assert "**The pick: MountainCar-v0** (the best median final score of either side; the final scores tie and " \
           "the area breaks it)." in (tmp_path / "a" / "sweep.md").read_text()
    write_sitting(tmp_path / "b" / "MountainCar-v0", {"sb3": [0.0, 0.0], "sb3-scaled": [0.0, 0.0]})
    write_sitting(tmp_path / "b" / "sb3-defaults", {"sb3": [0.0, 0.0], "sb3-scaled": [0.0, 0.0]})
    write_sitting(tmp_path / "headline", {"sb3": [0.0, 0.0], "sb3-scaled": [0.0, 0.0]})
    fair_sweep.main([str(tmp_path / "b"), "--setting", f"LunarLander-v3={tmp_path / 'headline'}",
                     "--stands", "LunarLander-v3"])
    assert "**The pick: LunarLander-v3** (" in (tmp_path / "b" / "sweep.md").read_text()
