"""The Q-network of a config and an env's observation spec: MLP, conv net or LSTM, with input scaling inside.

Every role makes the same network from the settings and the spec alone, so weights published by the learner fit
every reader. Why observations are scaled inside the network: replay, actors and exported policies all keep
raw observations, and every role's network agrees because the factors come from the env's spec alone.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tf_agents.networks import q_network, q_rnn_network

from dqn.settings.config import CommonConfig
from dqn.settings.loading import ConfigError


def check_network_input(config: CommonConfig, observation_spec) -> None:
    """Conv layers need image observations (H, W, C) and images need conv layers; ConfigError otherwise."""
    image = len(observation_spec.shape) == 3
    if config.conv_layer_params is not None and not image:
        raise ConfigError("conv_layer_params", f"needs image observations (height, width, channels); env "
                                               f"{config.env_id!r} observes shape {observation_spec.shape}: "
                                               "leave it unset (none) for an MLP")
    if config.conv_layer_params is None and image:
        raise ConfigError("conv_layer_params", f"env {config.env_id!r} observes images {observation_spec.shape}: "
                                               "set conv layers, e.g. 32,8,4,64,4,2,64,3,1 (or --preset breakout)")


def conv_network_kwargs(config: CommonConfig) -> dict:
    """QNetwork arguments of a conv net (none for an MLP): uint8 observations are scaled to [0, 1] in the network.

    Scaling inside the network (the book's Lambda preprocessing layer) lets observations travel and sit in
    replay as uint8, a quarter of float32's bytes.
    """
    if config.conv_layer_params is None:
        return {}
    scale = tf.keras.layers.Lambda(lambda observation: tf.cast(observation, tf.float32) / 255.0)
    return {"preprocessing_layers": scale, "conv_layer_params": config.conv_layers()}


#: Bounds above this are "unbounded" in practice (some envs use float32's max); such features stay unscaled.
LARGEST_SCALED_BOUND = 1e6


def observation_scale(observation_spec, narrow_only: bool = False) -> np.ndarray | None:
    """Per-feature factors that bring finite Box bounds to [-1, 1]: 1 / max(|low|, |high|), 1 where unbounded.

    `narrow_only`: only features bounded within 1 are scaled (up); wider bounds are often loose caps (a max speed)
    that dividing by would shrink typical values far below 1. None when no feature would change.
    """
    shape = tuple(observation_spec.shape)
    low = np.broadcast_to(np.asarray(observation_spec.minimum, np.float64), shape)
    high = np.broadcast_to(np.asarray(observation_spec.maximum, np.float64), shape)
    bound = np.maximum(np.abs(low), np.abs(high))
    scalable = np.isfinite(bound) & (bound > 0) & (bound <= (1.0 if narrow_only else LARGEST_SCALED_BOUND))
    scale = np.ones(shape, np.float32)
    scale[scalable] = 1.0 / bound[scalable]
    return None if np.all(scale == 1.0) else scale


def mlp_network_kwargs(config: CommonConfig, observation_spec) -> dict:
    """QNetwork arguments of an MLP: with observation_scaling bounds, a Rescaling layer in front of the layers.

    Why in the network: replay, actors and exported policies all keep raw observations, and every role's
    network agrees because the factors come from the env's spec alone.
    """
    mode = config.observation_scaling
    scale = observation_scale(observation_spec, narrow_only=mode == "narrow") if mode != "none" else None
    if scale is None:
        return {}
    return {"preprocessing_layers": tf.keras.layers.Rescaling(scale.tolist(), name="observation_scaling")}


def make_q_network(config: CommonConfig, observation_spec, action_spec):
    """QNetwork (MLP or conv), or QRnnNetwork when lstm_size is set (the dense layers after the LSTM).

    Why after: an LSTM's output is tanh-bounded, so Q-values read straight off it (one linear layer) can only
    reach returns in the tens through slowly growing weights; a ReLU MLP between the LSTM and the Q-values
    scales freely, as in the feed-forward network.
    """
    if config.conv_layer_params is None:
        input_kwargs = mlp_network_kwargs(config, observation_spec)
    else:
        input_kwargs = conv_network_kwargs(config)
    if config.lstm_size:
        return q_rnn_network.QRnnNetwork(observation_spec, action_spec, input_fc_layer_params=None,
                                         lstm_size=config.lstm_size, output_fc_layer_params=config.fc_layer_params,
                                         **input_kwargs)
    return q_network.QNetwork(observation_spec, action_spec, fc_layer_params=config.fc_layer_params, **input_kwargs)
