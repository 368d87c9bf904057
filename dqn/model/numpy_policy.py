"""The collect policy of an MLP Q-network, run in numpy on the caller's thread (the actor's "host" inference).

Why: every `tf.function` call pays a fixed hand-off to TF's executor threads and back before its first op runs,
which dominates a small MLP's forward pass; the same pass in numpy pays no hand-off, only the matmuls. The
layers, their
order and their activations are read from the TF-Agents `QNetwork` itself (with the observation-scaling
`Rescaling` layer, dqn/model/agent.py), and `HostQNetwork.mirror` checks its Q-values against the network's on a probe
batch; any network it cannot mirror exactly (conv, RNN, other preprocessing layers, other activations) keeps the
graph policy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
from tf_agents.networks import encoding_network, q_network

from dqn.model.actions import ValidActions
from dqn.model.layer_norm import NormalizedQNetwork

#: Activations the mirror knows (True: relu); a Dense layer with any other keeps the graph policy.
_RELU_OF = {tf.keras.activations.relu: True, tf.keras.activations.linear: False}
#: Largest |Q| difference from the TF network accepted on the probe batch (float32 sums in another order).
_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class _DenseLayer:
    """Positions of one Dense layer's kernel and bias in the policy's variable list, and its activation.

    With `norm` (the positions of a LayerNormalization's gamma and beta, and its epsilon) the layer's output is
    normalised before the activation (`--layer-norm`).
    """

    kernel_index: int
    bias_index: int
    relu: bool
    norm: tuple[int, int, float] | None = None


class HostQNetwork:
    """Numpy forward pass of a TF-Agents MLP `QNetwork`, with weights given as the policy's variable list."""

    def __init__(self, layers: list[_DenseLayer], weights: list[np.ndarray], input_scale: np.ndarray | None = None):
        self._layers = layers
        self._input_scale = None if input_scale is None else np.asarray(input_scale, np.float32).reshape(-1)
        self._weights: list[np.ndarray] = []
        self.set_weights(weights)

    @classmethod
    def mirror(cls, network, variables: list[tf.Variable]) -> HostQNetwork | None:
        """A numpy copy of `network` (current weights of `variables`), or None when it cannot be mirrored exactly.

        `variables` is the policy's variable list, in the order the learner publishes them.
        """
        structure = _mlp_structure(network, variables)
        if structure is None:
            return None
        layers, input_scale = structure
        host = cls(layers, [variable.numpy() for variable in variables], input_scale)
        if not host._matches(network):
            return None
        return host

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """New weights: the policy's variable list as numpy arrays (what the `variables` table holds)."""
        self._weights = [np.asarray(value, np.float32) for value in weights]

    def q_values(self, observation: np.ndarray) -> np.ndarray:
        """Q-values [N, actions] of N observations."""
        hidden = np.asarray(observation, np.float32).reshape(len(observation), -1)  # the encoder's Flatten
        if self._input_scale is not None:
            hidden = hidden * self._input_scale
        for layer in self._layers:
            hidden = hidden @ self._weights[layer.kernel_index]
            hidden += self._weights[layer.bias_index]
            if layer.norm is not None:
                gamma, beta, epsilon = layer.norm
                units = hidden.shape[-1]
                hidden -= (hidden.sum(axis=-1) / units)[:, None]
                hidden *= (1.0 / np.sqrt(np.einsum("ij,ij->i", hidden, hidden) / units + epsilon))[:, None]
                hidden *= self._weights[gamma]
                hidden += self._weights[beta]
            if layer.relu:
                np.maximum(hidden, 0.0, out=hidden)
        return hidden

    def _matches(self, network) -> bool:
        """Same Q-values as the TF network on a fixed random batch (within float32 rounding)."""
        shape = network.input_tensor_spec.shape
        probe = np.random.default_rng(0).uniform(-2.0, 2.0, (8, *shape)).astype(np.float32)
        expected, _ = network(tf.constant(probe), training=False)
        return bool(np.max(np.abs(expected.numpy() - self.q_values(probe))) <= _TOLERANCE)


def _mlp_structure(network, variables: list[tf.Variable]) -> tuple[list[_DenseLayer], np.ndarray | None] | None:
    """(Dense layers in call order, input scale or None) of an MLP QNetwork, or None for any other structure."""
    if type(network) not in (q_network.QNetwork, NormalizedQNetwork) or tf.nest.is_nested(network.input_tensor_spec):
        return None  # a nested observation has one encoder per part: the graph policy runs it
    if network.input_tensor_spec.dtype != tf.float32:
        return None
    encoder, *head = network.layers
    if type(encoder) is not encoding_network.EncodingNetwork or len(head) != 1:
        return None
    encoder_layers = list(encoder.layers)
    input_scale = None
    if encoder_layers and type(encoder_layers[0]) is tf.keras.layers.Rescaling:
        rescaling = encoder_layers.pop(0)
        if np.any(np.asarray(rescaling.offset) != 0):
            return None
        input_scale = np.broadcast_to(np.asarray(rescaling.scale, np.float32),
                                      tuple(network.input_tensor_spec.shape))
    positions = {variable.ref(): index for index, variable in enumerate(variables)}
    layers, norms = [], 0
    for layer in [*encoder_layers, *head]:
        if type(layer) is tf.keras.layers.Flatten:
            continue
        last = layers[-1] if layers else None
        if _is_plain_layer_norm(layer) and last is not None and not last.relu and last.norm is None:
            if layer.gamma.ref() not in positions or layer.beta.ref() not in positions:
                return None
            layers[-1] = dataclasses.replace(last, norm=(positions[layer.gamma.ref()], positions[layer.beta.ref()],
                                                         float(layer.epsilon)))
            norms += 1
            continue
        if _is_plain_relu(layer) and last is not None and not last.relu:
            layers[-1] = dataclasses.replace(last, relu=True)
            continue
        if type(layer) is not tf.keras.layers.Dense or not layer.use_bias or layer.activation not in _RELU_OF:
            return None
        if layer.kernel.ref() not in positions or layer.bias.ref() not in positions:
            return None
        layers.append(_DenseLayer(positions[layer.kernel.ref()], positions[layer.bias.ref()],
                                  _RELU_OF[layer.activation]))
    if (len(layers) + norms) * 2 != len(variables):  # some variable is not one the mirror reads: not a plain MLP
        return None
    return layers, input_scale


def _is_plain_layer_norm(layer) -> bool:
    """A LayerNormalization over the last axis with a scale and a shift (what `--layer-norm` makes)."""
    return (type(layer) is tf.keras.layers.LayerNormalization and layer.center and layer.scale
            and np.atleast_1d(layer.axis).tolist() in ([-1], [1]))


def _is_plain_relu(layer) -> bool:
    """A ReLU layer with Keras' defaults: max(x, 0)."""
    return (type(layer) is tf.keras.layers.ReLU and layer.max_value is None and not layer.negative_slope
            and not layer.threshold)


class HostEpsilonGreedy:
    """Epsilon-greedy actions from a `HostQNetwork` (or a `GraphQNetwork`), like TF-Agents' EpsilonGreedyPolicy.

    With probability epsilon an env takes a uniformly random action (which may be the greedy one), otherwise
    the first action of highest Q-value; both are chosen by `dqn.model.actions`, among the valid actions: those of
    `mask` where one is given, else those of the observation's own mask (`valid`, the run's `ValidActions`).
    """

    def __init__(self, network: HostQNetwork, action_spec, seed: int, valid: ValidActions | None = None):
        self.network = network
        self.valid = valid or ValidActions.of(None, action_spec)
        self._dtype = action_spec.dtype.as_numpy_dtype
        self._rng = np.random.default_rng(seed)

    def actions_and_q_values(self, observation, epsilon: float,
                             mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(actions [N], Q-values [N, actions]) for N observations; `mask` [N, actions]: the valid ones.

        Without `mask` the observation's own (None where every action is valid).
        """
        valid = self.valid
        if mask is None:
            mask = valid.mask(observation)
        q_values = self.network.q_values(valid.network_observation(observation))
        actions = valid.greedy(q_values, mask).astype(self._dtype)
        explore = self._rng.random(len(actions)) < epsilon
        if explore.any():
            actions[explore] = valid.random(self._rng, int(explore.sum()), None if mask is None else mask[explore])
        return actions, q_values

    def actions(self, observation: np.ndarray, epsilon: float, mask: np.ndarray | None = None) -> np.ndarray:
        """Actions [N] for N observations (`mask` as in `actions_and_q_values`)."""
        return self.actions_and_q_values(observation, epsilon, mask)[0]
