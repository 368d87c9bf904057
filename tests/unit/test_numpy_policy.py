"""The actor's numpy collect policy acts like the TF-Agents policy it mirrors, and refuses networks it cannot mirror."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.networks import q_network
from tf_agents.trajectories import time_step as ts

from dqn.model.graph_policy import batched_actions
from dqn.model.numpy_policy import HostEpsilonGreedy, HostQNetwork
from dqn.resolve import resolved_builder
from dqn.settings.config import ActorConfig


def random_weights(bundle, seed: int) -> list[np.ndarray]:
    """Kernels scaled by fan-in (so both actions stay greedy somewhere), biases small."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, 1 / np.sqrt(v.shape[0]) if len(v.shape) == 2 else 0.1, v.shape)
             + ("gamma" in v.name)).astype(np.float32)  # a layer norm's scale near 1
            for v in bundle.policy_variables]


def observations(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (count, 4)).astype(np.float32)


@pytest.mark.parametrize("layers,scaling,layer_norm", [
    ((256, 256), "narrow", False), ((256, 256), "bounds", False), ((32,), "bounds", False),
    ((16, 8, 4), "bounds", False), ((256, 256), "none", False), ((256, 256), "narrow", True),
    ((16, 8, 4), "none", True)],
    ids=["default", "bounds", "one-layer", "three-layers", "unscaled-observations", "layer-norm", "layer-norm-three"])
def test_mirror_gives_the_q_values_and_greedy_actions_of_the_tf_agents_policy(layers, scaling, layer_norm):
    config = ActorConfig(fc_layer_params=layers, observation_scaling=scaling, layer_norm=layer_norm)
    bundle = resolved_builder(config).agent
    norms = [layer for layer in bundle.q_network.layers[0].layers if type(layer) is tf.keras.layers.LayerNormalization]
    assert len(norms) == (len(layers) if layer_norm else 0)
    mirror = HostQNetwork.mirror(bundle.q_network, bundle.policy_variables)
    assert mirror is not None
    greedy_graph = batched_actions(bundle.agent.policy)
    host = HostEpsilonGreedy(mirror, bundle.action_spec, seed=0)
    for seed in (1, 2):  # new weights reach the mirror through set_weights, the TF policy through its variables
        weights = random_weights(bundle, seed)
        for variable, value in zip(bundle.policy_variables, weights, strict=True):
            variable.assign(value)
        mirror.set_weights(weights)
        batch = observations(512, seed)
        expected_q, _ = bundle.q_network(tf.constant(batch), training=False)
        np.testing.assert_allclose(mirror.q_values(batch), expected_q.numpy(), rtol=1e-5, atol=1e-4)
        step = ts.TimeStep(np.ones(512, np.int32), np.zeros(512, np.float32), np.ones(512, np.float32), batch)
        expected_actions = greedy_graph(step)
        actions = host.actions(batch, epsilon=0.0)
        assert actions.dtype == expected_actions.dtype
        np.testing.assert_array_equal(actions, expected_actions)
        assert 0 < expected_actions.mean() < 1  # both actions occur, so equality is not trivial


def test_epsilon_takes_uniform_random_actions_at_its_rate():
    bundle = resolved_builder(ActorConfig(fc_layer_params=(16,))).agent
    mirror = HostQNetwork.mirror(bundle.q_network, bundle.policy_variables)
    host = HostEpsilonGreedy(mirror, bundle.action_spec, seed=0)
    batch = observations(20_000, 3)
    greedy = host.actions(batch, epsilon=0.0)
    # As TF-Agents' EpsilonGreedyPolicy: the random action may be the greedy one, so with 2 actions an env
    # leaves the greedy action with probability epsilon / 2.
    for epsilon in (0.2, 1.0):
        actions, q_values = host.actions_and_q_values(batch, epsilon)
        assert np.mean(actions != greedy) == pytest.approx(epsilon / 2, abs=0.015)
        np.testing.assert_array_equal(q_values.argmax(axis=1), greedy)
    assert set(np.unique(host.actions(batch, epsilon=1.0))) == {0, 1}


def test_networks_the_mirror_cannot_copy_exactly_keep_the_graph_policy():
    rnn = resolved_builder(ActorConfig(lstm_size=(8,), fc_layer_params=(16,), envs_per_item=1)).agent
    assert HostQNetwork.mirror(rnn.q_network, rnn.policy_variables) is None
    bundle = resolved_builder(ActorConfig(fc_layer_params=(16,))).agent
    tanh = q_network.QNetwork(bundle.time_step_spec.observation, bundle.action_spec, fc_layer_params=(16,),
                              activation_fn=tf.keras.activations.tanh)
    tanh.create_variables()
    assert HostQNetwork.mirror(tanh, tanh.variables) is None
    # Variables of another network (not the one the mirror reads its layers from) are refused too.
    assert HostQNetwork.mirror(bundle.q_network, tanh.variables) is None
    # A preprocessing layer other than a pure per-feature scale (here a shift) is not mirrored.
    shifted = q_network.QNetwork(bundle.time_step_spec.observation, bundle.action_spec, fc_layer_params=(16,),
                                 preprocessing_layers=tf.keras.layers.Rescaling(2.0, offset=1.0))
    shifted.create_variables()
    assert HostQNetwork.mirror(shifted, shifted.variables) is None
