"""The SB3 peer's settings: the zoo's or the published recipe where there is one, else one setting of a sweep of 4."""

from __future__ import annotations

import pytest

from bench.peers.published import NEAREST, PUBLISHED, RECIPE_ONLY, sb3_arguments, wrap_env
from bench.peers.sb3_snapshots import NO_RECIPE_SWEEP, SB3_DEFAULTS, ZOO, has_recipe, recipe

HELD_OUT = "gym_anytrading:stocks-v0"  # no rl-baselines3-zoo DQN entry


def test_an_env_without_a_zoo_recipe_needs_a_setting_of_the_sweep_and_gets_exactly_it():
    assert len(NO_RECIPE_SWEEP) <= 4
    with pytest.raises(SystemExit, match="give --recipe-of with one of"):
        recipe(HELD_OUT)
    assert recipe(HELD_OUT, recipe_of="MountainCar-v0") == ZOO["MountainCar-v0"]
    assert recipe(HELD_OUT, recipe_of="sb3-defaults") == SB3_DEFAULTS
    settings = [recipe(HELD_OUT, recipe_of=name) for name in NO_RECIPE_SWEEP]
    assert all(settings.count(setting) == 1 for setting in settings)  # no two settings of the sweep alike


def test_a_lent_recipe_is_scaled_like_the_zoos_own():
    scaled = recipe(HELD_OUT, 50_000, recipe_of="sb3-defaults")
    assert scaled["n_timesteps"] == 50_000 and scaled["learning_starts"] == 50  # the same fraction of the run
    assert scaled["exploration_fraction"] == SB3_DEFAULTS["exploration_fraction"]


def test_a_lent_recipe_is_refused_where_the_zoo_has_one_or_the_setting_is_not_in_the_sweep():
    with pytest.raises(SystemExit, match="for an env with no zoo recipe"):
        recipe("CartPole-v1", recipe_of="LunarLander-v3")
    with pytest.raises(SystemExit, match="takes one of"):
        recipe(HELD_OUT, recipe_of="Acrobot-v1")  # the same settings as LunarLander-v3's, so not a setting of its own


def test_the_harness_refuses_a_lent_recipe_for_an_env_with_its_own_before_any_row(tmp_path, capsys):
    from bench import fair_run

    with pytest.raises(SystemExit) as stop:
        fair_run.main(["--envs", "CartPole-v1", "--sides", "sb3", "--peer-recipe", "sb3-defaults", "--peer-python",
                       "python", "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert ("--peer-recipe is for the sb3 sides on envs with no rl-baselines3-zoo or published recipe"
            in capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_a_sitting_is_refused_where_an_sb3_side_has_no_recipe_or_a_lent_recipe_has_no_sb3_side():
    from bench.fair_sides import peer_recipe_problem

    assert "needs --peer-recipe" in peer_recipe_problem({HELD_OUT: ["ours", "sb3", "sb3-scaled"]}, None)
    assert "is for the sb3 sides" in peer_recipe_problem({HELD_OUT: ["ours", "ours-candidate"]}, "sb3-defaults")
    assert peer_recipe_problem({HELD_OUT: ["ours", "sb3"]}, "sb3-defaults") is None
    assert peer_recipe_problem({"CartPole-v1": ["ours", "sb3"], HELD_OUT: ["ours"]}, None) is None


def test_a_family_from_pypi_gets_its_published_recipe_scaled_like_the_zoos():
    minigrid, minatar = "bench.peer_envs:MiniGrid/DoorKey-5x5-v0", "bench.peer_envs:MinAtar/Breakout-v1"
    assert has_recipe(minigrid) and has_recipe(minatar) and not has_recipe(HELD_OUT)
    assert recipe(minigrid) == PUBLISHED[minigrid] and recipe(minigrid)["normalize"] is True
    scaled = recipe(minatar, 50_000)
    assert scaled["n_timesteps"] == 50_000 and scaled["learning_starts"] == 50  # 5,000 of 5M: the same fraction
    assert scaled["exploration_fraction"] == PUBLISHED[minatar]["exploration_fraction"]
    with pytest.raises(SystemExit, match="for an env with no zoo recipe"):
        recipe(minatar, recipe_of="sb3-defaults")  # its authors publish one


def test_a_recipe_reaches_sb3_without_its_own_keys():
    arguments = sb3_arguments(PUBLISHED["bench.peer_envs:MiniGrid/DoorKey-5x5-v0"])
    assert not set(RECIPE_ONLY) & set(arguments)
    assert arguments["policy"] == "MlpPolicy" and arguments["learning_rate"] == 6.3e-4


POPGYM = "popgym:popgym-PositionOnlyCartPoleEasy-v0"  # a partially observed env with the nearest recipe, no memory


def test_a_recipe_variant_adds_a_frame_stack_to_the_envs_own_recipe_and_only_there():
    stacked = recipe(POPGYM, 40_000, recipe_of="frame-stack-2")
    assert stacked == {**recipe(POPGYM, 40_000), "frame_stack": 2}
    assert "frame_stack" not in sb3_arguments(stacked)  # the env's wrapper, not an argument of SB3's DQN
    with pytest.raises(SystemExit, match="has none"):
        recipe(HELD_OUT, recipe_of="frame-stack-2")


def test_the_harness_takes_a_recipe_variant_only_for_envs_with_a_recipe():
    from bench.fair_sides import peer_recipe_problem

    assert peer_recipe_problem({POPGYM: ["ours", "sb3", "sb3-scaled"]}, "frame-stack-2") is None
    assert "changes the recipe" in peer_recipe_problem({HELD_OUT: ["ours", "sb3"]}, "frame-stack-2")
    assert "changes the recipe" in peer_recipe_problem({POPGYM: ["ours"]}, "frame-stack-4")


def test_a_stacked_recipe_observes_the_last_observations_zero_padded_after_a_reset():
    import gymnasium as gym
    import numpy as np

    env = wrap_env(gym.make("CartPole-v1"), {"frame_stack": 2})
    first, _ = env.reset(seed=0)
    assert first.shape == (2, 4) and not first[0].any() and first[1].any()
    second, *_ = env.step(0)
    np.testing.assert_array_equal(second[0], first[1])
    env.close()


def test_an_env_with_only_the_nearest_recipe_takes_the_sweep_and_keeps_how_it_is_observed():
    from bench.fair_sides import peer_recipe_problem

    flappy, minigrid = "bench.peer_envs:FlappyBird/Features-v0", "bench.peer_envs:MiniGrid/DoorKey-5x5-v0"
    assert {flappy, minigrid, POPGYM} <= NEAREST and "bench.peer_envs:MinAtar/Breakout-v1" not in NEAREST
    assert recipe(flappy, recipe_of="LunarLander-v3") == ZOO["LunarLander-v3"]
    swept = recipe(minigrid, 20_000, recipe_of="sb3-defaults")
    assert swept["env_wrapper"] == "flatten" and swept["normalize"] is True  # the zoo's MiniGrid handling stays
    assert swept["learning_rate"] == SB3_DEFAULTS["learning_rate"] and swept["learning_starts"] == 20
    assert peer_recipe_problem({flappy: ["sb3", "sb3-scaled"]}, "MountainCar-v0") is None
    assert "published recipe" in peer_recipe_problem({"bench.peer_envs:MinAtar/Breakout-v1": ["sb3"]}, "sb3-defaults")
