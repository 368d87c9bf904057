"""--layer-norm: every Q-network kind normalises its hidden layers, its target network too, and it trains."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.policies import policy_saver
from tf_agents.specs import tensor_spec

from dqn.envs.making import EnvOptions
from dqn.model.policy_export import play_exported_policy
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig, LearnerConfig
from dqn.settings.loading import ConfigError, resolve

KINDS = {  # a plain MLP (CartPole), bfloat16 hidden layers over a small conv stack, and a branching network
    "mlp": dict(fc_layer_params=(16, 8)),
    "bfloat16-conv": dict(env_id="ALE/Breakout-v5", conv_layer_params=(8, 8, 4, 8, 4, 2), fc_layer_params=(16,),
                          compute_dtype="bfloat16"),
    "branching": dict(env_id="tests.action_envs:LargeMultiDiscrete-v0", fc_layer_params=(16,)),
}


def norm_layers(network) -> list:
    return [layer for layer in network.submodules if isinstance(layer, tf.keras.layers.LayerNormalization)]


@pytest.mark.parametrize("kind", KINDS)
def test_each_network_kind_and_its_target_normalise_every_hidden_layer_and_train(kind):
    agent = resolved_builder(LearnerConfig(layer_norm=True, batch_size=16, **KINDS[kind])).agent.agent
    network, target = agent._q_network, agent._target_q_network
    assert len(norm_layers(network)) == len(KINDS[kind]["fc_layer_params"]) == len(norm_layers(target))
    assert [v.shape for v in network.variables] == [v.shape for v in target.variables]  # the target copy fits
    experience = tensor_spec.sample_spec_nest(agent.training_data_spec, outer_dims=(16, 2))
    experience = tf.nest.map_structure(lambda t: t if t.dtype == tf.uint8 else tf.zeros_like(t), experience)
    before = [v.numpy().copy() for v in network.trainable_variables]
    assert np.isfinite(float(agent.train(experience).loss))
    moved = [not np.array_equal(b, v.numpy()) for b, v in zip(before, network.trainable_variables, strict=True)]
    assert any(moved)


def test_the_exported_policy_keeps_the_normalised_network(tmp_path):
    builder = resolved_builder(LearnerConfig(layer_norm=True, fc_layer_params=(16, 8)))
    policy_saver.PolicySaver(builder.make_export_policy(), batch_size=None).save(str(tmp_path / "policy"))
    loaded = tf.saved_model.load(str(tmp_path / "policy"))
    assert any("layer_normalization" in v.name for v in loaded.model_variables)
    returns, illegal = play_exported_policy(str(tmp_path / "policy"), builder.config.env_id, 2, seed=3,
                                            options=EnvOptions.from_config(builder.config))
    assert len(returns) == 2 and illegal == 0


def test_without_the_option_no_layer_is_normalised():
    agent = resolved_builder(LearnerConfig(fc_layer_params=(16, 8))).agent.agent
    assert not norm_layers(agent._q_network)


def test_layer_norm_with_an_lstm_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="--layer-norm / DQN_LAYER_NORM: normalises a feed-forward"):
        resolve(CommonConfig, environ={}, flags={"layer_norm": "true", "lstm_size": "32"})
