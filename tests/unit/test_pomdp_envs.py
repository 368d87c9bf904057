"""The partially observed CartPole of bench/pomdp_envs.py, made as a user's `module:EnvId` is; what auto makes of it."""

import gymnasium as gym
import numpy as np
import pytest

import tests.user_envs  # noqa: F401  (registers the image env)
from dqn.envs.hidden_state import HIDDEN_STATE_HISTORY, unexplained_change
from dqn.envs.making import EnvOptions, env_specs, make_gym_env
from dqn.envs.spaces import EnvError
from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig
from tests.helpers import auto_setting

ENV_ID = "bench.pomdp_envs:CartPoleNoVelocity-v0"


def test_registers_on_import_and_keeps_only_position_and_angle():
    env, full = gym.make(ENV_ID), gym.make("CartPole-v1")
    assert env.spec.max_episode_steps == 500 and env.spec.reward_threshold == 475.0
    assert env.observation_space.shape == (2,)
    np.testing.assert_allclose(env.observation_space.high, full.observation_space.high[[0, 2]])
    observation, _ = env.reset(seed=3)
    full_observation, _ = full.reset(seed=3)
    np.testing.assert_allclose(observation, full_observation[[0, 2]])
    for action in [0, 1, 1, 0, 1]:  # same dynamics: the same actions give the same positions and angles
        observation, reward, terminated, _, _ = env.step(action)
        full_observation, full_reward, full_terminated, _, _ = full.step(action)
        np.testing.assert_allclose(observation, full_observation[[0, 2]])
        assert (reward, terminated) == (full_reward, full_terminated)
    assert not np.allclose(full_observation[[1, 3]], 0)  # the velocities it drops are real information


def test_the_service_makes_it_from_its_module_id():
    observation, action, threshold, _ = env_specs(ENV_ID, EnvOptions())
    assert observation.shape == (2,) and int(action.maximum) == 1 and threshold == 475.0
    envs = GymnasiumVectorEnvironment(ENV_ID, num_envs=2, seed=0)
    try:
        assert envs.reset().observation.shape == (2, 2)
    finally:
        envs.close()


def test_observation_history_concatenates_the_last_observations_oldest_first():
    options = EnvOptions(observation_history=3)
    observation, _, _, _ = env_specs(ENV_ID, options)
    assert observation.shape == (6,)
    env, plain = make_gym_env(ENV_ID, options), gym.make(ENV_ID)
    stacked, _ = env.reset(seed=5)
    seen = [plain.reset(seed=5)[0]] * 3  # the first observation fills the history at reset
    np.testing.assert_allclose(stacked, np.concatenate(seen))
    for action in [1, 0, 1, 1]:
        seen = seen[1:] + [plain.step(action)[0]]
        np.testing.assert_allclose(env.step(action)[0], np.concatenate(seen))
    envs = GymnasiumVectorEnvironment(ENV_ID, num_envs=2, seed=0, options=options)
    try:
        assert envs.reset().observation.shape == (2, 6)
    finally:
        envs.close()


def test_observation_history_of_an_image_is_refused_before_any_role_starts():
    with pytest.raises(EnvError, match=r"BoolGrid-v0.*--observation-history 2 stacks vector observations.*set "
                                       r"--observation-history 1"):
        resolved_builder(CommonConfig(env_id="tests.user_envs:BoolGrid-v0", observation_history=2))



@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_history_is_two_where_the_observation_hides_the_velocities(seed):
    assert auto_setting(ENV_ID, "observation_history", seed=seed) == HIDDEN_STATE_HISTORY


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "tests.user_envs:SlowCartPole-v0"])
def test_auto_history_is_one_where_the_observation_is_the_state(env_id, caplog):
    caplog.set_level("INFO")
    assert auto_setting(env_id, "observation_history") == 1
    # 1 is also the fallback of a probe that failed or saw too little: the decision must come from measured play.
    decided = [r.getMessage() for r in caplog.records if r.getMessage().startswith("observation_history auto: 1 (")]
    assert len(decided) == 1 and "random play: the observation and action leave" in decided[0], caplog.text


def test_auto_history_leaves_images_alone_without_playing(caplog):
    caplog.set_level("INFO")
    assert auto_setting("tests.user_envs:BoolGrid-v0", "observation_history") == 1
    assert "observation_history auto: 1 (not a vector observation)" in caplog.text


def test_the_resolve_step_decides_auto_and_keeps_an_explicit_history():
    hidden = resolved_builder(CommonConfig(env_id=ENV_ID))
    assert hidden.config.observation_history == 2 and hidden.observation_spec.shape == (4,)
    assert resolved_builder(CommonConfig(env_id=ENV_ID, observation_history=1)).observation_spec.shape == (2,)
    assert resolved_builder(CommonConfig(env_id="CartPole-v1")).config.observation_history == 1
    with pytest.raises(ValueError, match="observation_history auto must be resolved"):
        EnvOptions.from_config(CommonConfig())


def test_the_previous_observation_counts_only_where_it_predicts_the_next():
    """Pure logic on made-up transitions: a position whose velocity is hidden, and fresh noise."""
    rng = np.random.default_rng(0)
    velocity, position = np.zeros(3001), np.zeros((3001, 1))
    for t in range(3000):  # a bounded position moved by a slowly changing velocity nobody observes
        velocity[t + 1] = 0.95 * velocity[t] + rng.normal(0, 0.1)
        position[t + 1] = 0.98 * position[t] + velocity[t]
    actions = rng.integers(0, 2, 2999)
    without, with_previous = unexplained_change(position[:-2], position[1:-1], actions, position[2:], num_actions=2)
    assert without - with_previous > 0.5 and with_previous < 0.2  # two positions give the velocity
    noise = rng.normal(0, 1, (3001, 3))  # observations drawn fresh each step: nothing predicts them
    without, with_previous = unexplained_change(noise[:-2], noise[1:-1], actions, noise[2:], num_actions=2)
    assert abs(without - with_previous) < 0.05
