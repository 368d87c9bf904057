"""Layer normalisation of a Q-network's hidden layers (`--layer-norm`): Dense, LayerNormalization, ReLU.

Why: normalised pre-activations keep every hidden layer at one scale whatever the weights become, so the targets
the network makes for itself cannot grow with its own outputs (Ba et al. 2016; Gallici et al. 2024 train DQN
without a target network this way). Conv layers and the Q-value layer stay as they are. The networks take it as a
constructor argument, because TF-Agents makes the target network by calling the constructor again (`copy`).
"""

from __future__ import annotations

import tensorflow as tf
from tf_agents.networks import encoding_network, q_network


def normalize_hidden_layers(encoder: encoding_network.EncodingNetwork) -> None:
    """Each hidden Dense layer of `encoder` (not built yet) becomes Dense, LayerNormalization, ReLU."""
    layers = []
    for layer in encoder._postprocessing_layers:
        if type(layer) is not tf.keras.layers.Dense:
            layers.append(layer)
            continue
        policy = layer.dtype_policy
        layers += [tf.keras.layers.Dense(layer.units, kernel_initializer=layer.kernel_initializer, dtype=policy),
                   tf.keras.layers.LayerNormalization(dtype=policy), tf.keras.layers.ReLU(dtype=policy)]
    encoder._postprocessing_layers = layers


class NormalizedQNetwork(q_network.QNetwork):
    """TF-Agents' QNetwork with its hidden layers normalised; QNetwork's arguments otherwise."""

    def __init__(self, input_tensor_spec, action_spec, preprocessing_layers=None, preprocessing_combiner=None,
                 conv_layer_params=None, fc_layer_params=(75, 40), name="QNetwork"):
        super().__init__(input_tensor_spec, action_spec, preprocessing_layers=preprocessing_layers,
                         preprocessing_combiner=preprocessing_combiner, conv_layer_params=conv_layer_params,
                         fc_layer_params=fc_layer_params, name=name)
        normalize_hidden_layers(self._encoder)
