"""Integer images of category codes (a MiniGrid-like view) are one-hot encoded; pixel images stay scaled."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.envs.image_codes import CODE_DEPTH, image_encoding_for
from dqn.envs.making import env_specs
from dqn.envs.spaces import observation_spec
from dqn.model.encoders import CodeOneHot
from dqn.model.networks import make_q_network
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig
from tests.helpers import auto_setting


def resolved(env_id: str, **settings) -> str:
    return auto_setting(env_id, "image_encoding", **settings)


@pytest.mark.parametrize("name, encoding", [
    ("CodeGrid-v0", "one-hot"),  # codes 0-11 in a Box declared 0-255: random play tells
    ("ChannelsFirst-v0", "scaled"),  # pixels of 0 and 255
    ("DictObs-v0", "scaled"),  # an image part with values up to 49
    ("BoolGrid-v0", "scaled"),  # no integer image beyond 0/1
    ("CartPole-v1", "scaled"),
])
def test_auto_tells_code_grids_from_pixel_images(name, encoding):
    env_id = name if name == "CartPole-v1" else f"tests.user_envs:{name}"
    assert resolved(env_id) == encoding


def test_an_explicit_setting_is_kept():
    assert resolved("tests.user_envs:CodeGrid-v0", image_encoding="scaled") == "scaled"
    assert resolved("tests.user_envs:ChannelsFirst-v0", image_encoding="one-hot") == "one-hot"


def test_a_box_declared_below_the_code_depth_is_codes_without_playing():
    spec = observation_spec(gym.spaces.Box(0, 9, (4, 4, 2), np.uint8))
    assert image_encoding_for(spec, None)[0] == "one-hot"  # None: no random play to go by


def test_codes_become_one_hot_channels_and_an_unknown_code_all_zeros():
    codes = tf.constant([[[[2, CODE_DEPTH + 3]]]], tf.uint8)  # one cell, two channels
    one_hot = CodeOneHot(CODE_DEPTH)(codes).numpy()
    assert one_hot.shape == (1, 1, 1, 2 * CODE_DEPTH)
    assert one_hot[0, 0, 0, 2] == 1 and one_hot.sum() == 1


def first_conv_kernel(network) -> tf.Variable:
    return next(v for v in network.trainable_variables if len(v.shape) == 4)


def test_the_builder_gives_a_code_grid_one_hot_inputs_and_every_role_the_same_network():
    builder = resolved_builder(CommonConfig(env_id="tests.user_envs:CodeGrid-v0", fc_layer_params=(8,)))
    assert builder.config.image_encoding == "one-hot"
    assert first_conv_kernel(builder.agent.q_network).shape[2] == 3 * CODE_DEPTH
    scaled = resolved_builder(CommonConfig(env_id="tests.user_envs:CodeGrid-v0", fc_layer_params=(8,),
                                     image_encoding="scaled"))
    assert first_conv_kernel(scaled.agent.q_network).shape[2] == 3
    env = builder.make_envs(2, seed=3)
    q_values, _ = builder.agent.q_network(tf.constant(env.reset().observation))
    assert q_values.shape == (2, 2) and np.isfinite(q_values.numpy()).all()
    env.close()


def test_a_network_is_never_built_on_an_undecided_encoding():
    config = CommonConfig(env_id="tests.user_envs:CodeGrid-v0")
    spec, actions, _, _ = env_specs(config.env_id)
    with pytest.raises(ValueError, match="image_encoding auto must be resolved"):
        make_q_network(dataclasses.replace(config, image_encoding="auto"), spec, actions)


def test_an_image_part_of_a_dict_gets_its_codes_one_hot_beside_the_other_parts():
    builder = resolved_builder(CommonConfig(env_id="tests.user_envs:DictObs-v0", fc_layer_params=(8,),
                                      image_encoding="one-hot"))
    assert first_conv_kernel(builder.agent.q_network).shape[2] == 3 * CODE_DEPTH
    env = builder.make_envs(2, seed=3)
    q_values, _ = builder.agent.q_network(tf.nest.map_structure(tf.constant, env.reset().observation))
    assert q_values.shape == (2, 2) and np.isfinite(q_values.numpy()).all()
    env.close()
