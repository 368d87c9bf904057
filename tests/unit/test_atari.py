"""Atari support: preset resolution, network/observation validation, the preprocessed Breakout spaces (real ROM)."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bench.single_env import GymnasiumEnvironment
from dqn.envs.atari import is_atari
from dqn.envs.making import EnvOptions, env_specs
from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.resolve import resolve_settings
from dqn.settings import loading as config_loading
from dqn.settings.config import ALL_CONFIG_CLASSES, ActorConfig, CommonConfig, LearnerConfig, LocalConfig
from dqn.settings.loading import ConfigError, resolve
from dqn.settings.presets import PRESETS

BREAKOUT = "ALE/Breakout-v5"


def test_preset_sets_the_book_and_nature_settings():
    config = resolve(LocalConfig, environ={}, flags={"preset": "breakout"})
    assert config.env_id == BREAKOUT and config.preset == "breakout"
    assert config.conv_layers() == ((32, 8, 4), (64, 4, 2), (64, 3, 1)) and config.fc_layer_params == (512,)
    assert (config.gamma, config.batch_size, config.target_update_period) == (0.99, 32, 2000)
    assert (config.replay_max_size, config.replay_min_size, config.epsilon_end) == (1_000_000, 20_000, 0.01)


def test_explicit_settings_override_the_preset_at_every_layer():
    config = resolve(LearnerConfig, environ={"DQN_PRESET": "breakout", "DQN_GAMMA": "0.95"},
                     file_values={"batch_size": 8, "learning_rate": 0.01}, flags={"batch_size": "16"})
    assert config.env_id == BREAKOUT and config.conv_layer_params is not None  # from the preset
    assert (config.gamma, config.batch_size, config.learning_rate) == (0.95, 16, 0.01)
    from_file = resolve(LearnerConfig, environ={}, file_values={"preset": "breakout", "replay_min_size": 500})
    assert from_file.replay_min_size == 500 and from_file.env_id == BREAKOUT


def test_preset_fields_of_other_roles_are_skipped():
    actor = resolve(ActorConfig, environ={}, flags={"preset": "breakout"})
    assert actor.warmup_steps == PRESETS["breakout"]["warmup_steps"] and not hasattr(actor, "batch_size")


def test_every_preset_key_is_a_config_field_and_resolves():
    known = config_loading.known_field_names(ALL_CONFIG_CLASSES)
    for name, values in PRESETS.items():
        assert set(values) <= known, f"preset {name}: unknown keys {set(values) - known}"
        for cls in ALL_CONFIG_CLASSES:
            resolve(cls, environ={}, flags={"preset": name})


def test_the_small_machine_preset_changes_only_the_schedule_wrappers_evaluation_and_dtype_of_the_books():
    book = resolve(LocalConfig, environ={}, flags={"preset": "breakout"})
    small = resolve(LocalConfig, environ={}, flags={"preset": "breakout-small"})
    changed = {f.name for f in dataclasses.fields(book) if getattr(book, f.name) != getattr(small, f.name)}
    assert changed == {"preset", "root_dir", "atari_repeat_action_probability", "epsilon_decay_steps",
                       "target_update_period", "eval_interval", "atari_terminal_on_life_loss",
                       "atari_fire_on_reset", "atari_clip_rewards", "compute_dtype"}
    assert small.compute_dtype == "auto" and book.compute_dtype == "float32"
    assert (small.epsilon_decay_steps, small.target_update_period) == (25_000, 1_000)
    assert small.max_train_steps == book.max_train_steps == 625_000  # the book's budget: a 2-core run ends on the clock
    assert small.atari_repeat_action_probability == 0.0 and small.conv_layer_params == book.conv_layer_params


def test_unknown_preset_names_the_field_and_the_valid_ones():
    with pytest.raises(ConfigError, match=r"--preset / DQN_PRESET: unknown preset 'pong'; valid presets: breakout"):
        resolve(LocalConfig, environ={"DQN_PRESET": "pong"})


@pytest.mark.parametrize("value", ["32,8", "32,8,4,64"])
def test_conv_layer_params_must_be_triples(value):
    with pytest.raises(ConfigError, match="--conv-layer-params / DQN_CONV_LAYER_PARAMS: needs filters,kernel,stride"):
        resolve(CommonConfig, environ={}, flags={"conv_layer_params": value})


def test_conv_layers_on_vector_observations_are_refused():
    from dqn.resolve import resolved_builder

    with pytest.raises(ConfigError, match=r"--conv-layer-params .*needs image observations.*shape \(4,\)"):
        resolved_builder(CommonConfig(conv_layer_params=(32, 8, 4)))


def test_atari_frames_without_conv_layers_get_the_nature_stack():
    from dqn.resolve import resolved_builder

    network = resolved_builder(CommonConfig(env_id=BREAKOUT, fc_layer_params=(8,))).agent.q_network
    convs = [layer for layer in network.layers[0].layers if isinstance(layer, tf.keras.layers.Conv2D)]
    assert [(c.filters, c.kernel_size[0], c.strides[0]) for c in convs] == [(32, 8, 4), (64, 4, 2), (64, 3, 1)]


def test_conv_layers_that_do_not_fit_the_image_are_refused_naming_the_layer():
    from dqn.resolve import resolved_builder

    with pytest.raises(ConfigError, match=r"--conv-layer-params .*layer 3 \(64,10,1\) needs at least 10x10 but "
                                          r"gets 9x9 from an image of shape \(84, 84, 4\)"):
        resolved_builder(CommonConfig(env_id=BREAKOUT, conv_layer_params=(32, 8, 4, 64, 4, 2, 64, 10, 1)))


def test_conv_agent_takes_uint8_observations():
    from dqn.resolve import resolved_builder

    bundle = resolved_builder(resolve(CommonConfig, environ={}, flags={"preset": "breakout"})).agent
    assert bundle.time_step_spec.observation.dtype.name == "uint8"
    assert bundle.time_step_spec.observation.shape == (84, 84, 4)
    q_values, _ = bundle.agent._q_network(np.full((2, 84, 84, 4), 255, np.uint8))
    assert q_values.shape == (2, 4) and np.isfinite(q_values.numpy()).all()


def test_breakout_spaces_are_uint8_84x84x4():
    observation, action, _, _ = env_specs(BREAKOUT, EnvOptions())
    assert is_atari(BREAKOUT) and not is_atari("CartPole-v1")
    assert observation.shape == (84, 84, 4) and observation.dtype == np.uint8
    assert (observation.minimum, observation.maximum) == (0, 255)
    assert (action.minimum, action.maximum) == (0, 3)
    env = GymnasiumEnvironment(BREAKOUT, seed=0, options=EnvOptions())
    first = env.reset().observation
    assert first.shape == (84, 84, 4) and first.dtype == np.uint8
    # AtariPreprocessing does the skipping: the ALE env itself must not skip frames too.
    assert env.gym.unwrapped._frameskip == 1
    second = env.step(np.int64(1)).observation  # FIRE
    np.testing.assert_array_equal(second[..., :3], first[..., 1:])  # the newest frame is the last channel
    env.close()


def test_vector_env_and_options_shape_the_observations():
    env = GymnasiumVectorEnvironment(BREAKOUT, 2, seed=0, options=EnvOptions(atari_frame_stack=2))
    assert env.reset().observation.shape == (2, 84, 84, 2)
    env.close()
    color, _, _, _ = env_specs(BREAKOUT, EnvOptions(atari_grayscale=False, atari_screen_size=64))
    assert color.shape == (64, 64, 12)


def test_max_episode_steps_counts_agent_steps():
    env = GymnasiumEnvironment(BREAKOUT, seed=0, options=EnvOptions(max_episode_steps=5))
    env.reset()
    steps = [env.step(np.int64(0)) for _ in range(5)]
    assert [s.is_last() for s in steps] == [False] * 4 + [True] and steps[-1].discount == 1.0  # truncation
    env.close()


def test_cartpole_is_made_as_before():
    options = EnvOptions.from_config(resolve_settings(CommonConfig()))  # auto: CartPole is fully observed
    assert options == EnvOptions() and dataclasses.fields(options)
    assert env_specs("CartPole-v1", options) == env_specs("CartPole-v1")
    env = GymnasiumEnvironment("CartPole-v1", seed=0)
    assert type(env.gym).__name__ == "TimeLimit" and env.gym.spec.max_episode_steps == 500
