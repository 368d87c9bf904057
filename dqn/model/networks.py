"""The Q-network of a config and an env's observation spec: MLP, conv net or LSTM, with the input encoders inside.

Every role makes the same network from the settings and the spec alone, so weights published by the learner fit
every reader. Why observations are converted inside the network (dqn/model/encoders.py): replay, actors and
exported policies all keep raw observations in their compact dtypes, and every role's network agrees because the
conversion comes from the env's spec alone.
"""

from __future__ import annotations

import tensorflow as tf
from tf_agents.networks import q_network, q_rnn_network

from dqn.envs.spaces import is_nested
from dqn.model.encoders import conv_misfit, input_kwargs, is_image
from dqn.settings.config import CommonConfig
from dqn.settings.loading import ConfigError


def check_network_input(config: CommonConfig, observation_spec) -> None:
    """Explicit conv layers need image parts and must fit each of them; ConfigError naming the misfit otherwise."""
    if config.conv_layer_params is None:
        return
    parts = tf.nest.flatten(observation_spec)
    images = [spec for spec in parts if is_image(spec)]
    if not images:
        shapes = ", ".join(str(tuple(spec.shape)) for spec in parts)
        raise ConfigError("conv_layer_params", f"needs image observations (height, width[, channels]); env "
                                               f"{config.env_id!r} observes shape {shapes}: leave it unset (none) "
                                               "for an MLP")
    for spec in images:
        misfit = conv_misfit(tuple(spec.shape), config.conv_layers())
        if misfit:
            part = f" (part {spec.name!r})" if is_nested(observation_spec) else ""
            raise ConfigError("conv_layer_params", f"does not fit env {config.env_id!r}'s images{part}: {misfit}; "
                                                   "leave it unset for a stack chosen from the image size")


def make_q_network(config: CommonConfig, observation_spec, action_spec):
    """QNetwork (MLP or conv), or QRnnNetwork when lstm_size is set (the dense layers after the LSTM).

    Why after: an LSTM's output is tanh-bounded, so Q-values read straight off it (one linear layer) can only
    reach returns in the tens through slowly growing weights; a ReLU MLP between the LSTM and the Q-values
    scales freely, as in the feed-forward network.
    """
    encoders = input_kwargs(observation_spec, config.conv_layers(), config.observation_scaling)
    if config.lstm_size:
        return q_rnn_network.QRnnNetwork(observation_spec, action_spec, input_fc_layer_params=None,
                                         lstm_size=config.lstm_size, output_fc_layer_params=config.fc_layer_params,
                                         **encoders)
    return q_network.QNetwork(observation_spec, action_spec, fc_layer_params=config.fc_layer_params, **encoders)
