"""Every observation kind maps to a compact spec and an encoder; unsupported spaces and misfit convs are refused."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.envs.making import env_specs
from dqn.envs.spaces import EnvError, observation_spec
from dqn.model.encoders import auto_conv_layers, conv_misfit, image_size, one_hot_depth
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig
from dqn.settings.loading import ConfigError


@pytest.mark.parametrize("space, dtype, shape", [
    (gym.spaces.Box(0, 1, (6, 6, 2), np.bool_), np.uint8, (6, 6, 2)),
    (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), np.uint8, (84, 84, 4)),
    (gym.spaces.Box(-1, 1, (3,), np.float64), np.float64, (3,)),
    (gym.spaces.Box(-5, 5, (3,), np.int8), np.int32, (3,)),
    (gym.spaces.Discrete(7, start=2), np.int64, ()),
    (gym.spaces.MultiDiscrete([3, 4]), np.int64, (2,)),
    (gym.spaces.MultiBinary(5), np.uint8, (5,)),
])
def test_each_part_keeps_a_compact_dtype(space, dtype, shape):
    spec = observation_spec(space)
    assert spec.dtype == dtype and spec.shape == shape


def test_nests_keep_their_structure():
    space = gym.spaces.Dict({"grid": gym.spaces.Box(0, 1, (4, 4), np.bool_),
                             "pair": gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.MultiBinary(2)))})
    spec = observation_spec(space)
    assert set(spec) == {"grid", "pair"} and len(spec["pair"]) == 2
    assert spec["grid"].name == "observation/grid" and spec["pair"][0].dtype == np.int64


@pytest.mark.parametrize("space, words", [
    (gym.spaces.Text(5), "Text"),
    (gym.spaces.Box(0, 1, (2, 2, 2, 2)), "rank 4"),
    (gym.spaces.Dict({"ok": gym.spaces.Discrete(2), "bad": gym.spaces.Graph(gym.spaces.Box(0, 1), None)}), "Graph"),
])
def test_other_spaces_are_refused_naming_the_space(space, words):
    with pytest.raises(EnvError, match=words):
        observation_spec(space)


def test_a_text_env_is_refused_at_start_with_the_fix():
    with pytest.raises(EnvError, match=r"tests.user_envs:TextObs-v0.*Text.*ObservationWrapper"):
        env_specs("tests.user_envs:TextObs-v0")


@pytest.mark.parametrize("shape, stack", [
    ((84, 84, 4), ((32, 8, 4), (64, 4, 2), (64, 3, 1))),
    ((4, 84, 84), ((32, 8, 4), (64, 4, 2), (64, 3, 1))),  # channels first
    ((20, 30, 3), ((32, 4, 2), (64, 3, 1))),
    ((10, 10, 4), ((16, 3, 1), (32, 3, 1))),  # MinAtar-sized grids: stride 1
    ((10, 10), ((16, 3, 1), (32, 3, 1))),
    ((4, 4, 1), ((16, 3, 1),)),
    ((2, 2, 3), ()),
])
def test_the_conv_stack_follows_the_image_size(shape, stack):
    assert auto_conv_layers(shape) == stack
    assert conv_misfit(shape, stack) is None


def test_channels_first_images_are_read_channels_last():
    assert image_size((3, 64, 64)) == (64, 64, 3) and image_size((64, 64, 3)) == (64, 64, 3)
    assert image_size((10, 10)) == (10, 10, 1)


def test_nature_convs_do_not_fit_a_small_grid_and_say_where():
    with pytest.raises(ConfigError, match=r"conv-layer-params.*layer 1 \(32,8,4\) needs at least 8x8 but gets "
                                          r"6x6 from an image of shape \(6, 6, 2\)"):
        resolved_builder(CommonConfig(env_id="tests.user_envs:BoolGrid-v0", conv_layer_params=(32, 8, 4, 64, 4, 2)))


@pytest.mark.parametrize("name", ["BoolGrid-v0", "ChannelsFirst-v0", "CodeGrid-v0", "StateIndex-v0",
                                  "MultiDiscreteObs-v0", "MultiBinaryObs-v0", "DictObs-v0", "TupleObs-v0",
                                  "FloatGrid-v0"])
def test_every_kind_gets_a_network_and_the_replay_stores_its_own_dtype(name):
    builder = resolved_builder(CommonConfig(env_id=f"tests.user_envs:{name}", fc_layer_params=(8,)))
    env = builder.make_envs(3, seed=1)
    time_step = env.reset()
    q_values, _ = builder.agent.q_network(tf.nest.map_structure(tf.constant, time_step.observation))
    assert q_values.shape == (3, 2) and np.isfinite(q_values.numpy()).all()
    stored = tf.nest.flatten(builder.table_signatures()["replay"].observation)
    for signature, spec in zip(stored, tf.nest.flatten(builder.observation_spec), strict=True):
        assert signature.dtype.as_numpy_dtype == spec.dtype  # e.g. a bool grid travels as one byte per cell
    env.close()


@pytest.mark.parametrize("space, depth", [
    (gym.spaces.Discrete(500), 500),  # Taxi's state index: a category, however many states
    (gym.spaces.Discrete(4096), 4096),
    (gym.spaces.Discrete(4097), None),  # past what one input layer should hold: a feature
    (gym.spaces.Discrete(2), None),  # two values: a 0/1 feature says as much
    (gym.spaces.MultiDiscrete([256, 3]), 256),
    (gym.spaces.MultiDiscrete([257, 3]), None),  # a wide integer vector stays features
    (gym.spaces.Box(0, 9, (4,), np.int64), 10),
    (gym.spaces.Box(0, 1, (4,), np.float32), None),
])
def test_a_discrete_state_index_is_one_hot_up_to_4096_values_and_integer_vectors_up_to_256(space, depth):
    assert one_hot_depth(observation_spec(space)) == depth
