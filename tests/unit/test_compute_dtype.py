"""compute_dtype bfloat16: hidden layers compute in bfloat16, Q-values and weights stay float32, same object graph."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec

from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig, LearnerConfig
from dqn.settings.loading import ConfigError, resolve

SMALL_CONV = dict(env_id="ALE/Breakout-v5", conv_layer_params=(8, 8, 4, 8, 4, 2), fc_layer_params=(16,))


def network_and_agent(compute_dtype: str):
    bundle = resolved_builder(LearnerConfig(compute_dtype=compute_dtype, batch_size=16, **SMALL_CONV)).agent
    return bundle.agent._q_network, bundle.agent


def test_bfloat16_hidden_layers_with_a_float32_q_value_layer_and_float32_weights():
    network, agent = network_and_agent("bfloat16")
    observations = tf.zeros((2, 84, 84, 4), tf.uint8)
    q_values, _ = network(observations)
    assert q_values.dtype == tf.float32
    convs = [layer for layer in network.layers[0].layers if isinstance(layer, tf.keras.layers.Conv2D)]
    assert convs and all(layer.compute_dtype == "bfloat16" for layer in convs)
    assert network._q_value_layer.compute_dtype == "float32"
    assert all(v.dtype == tf.float32 for v in network.variables)
    assert tf.keras.mixed_precision.global_policy().name == "float32"  # other networks of the process unaffected


def test_a_bfloat16_checkpoint_restores_into_a_float32_network(tmp_path):
    bf16, _ = network_and_agent("bfloat16")
    f32, _ = network_and_agent("float32")
    for network in (bf16, f32):
        network.create_variables()
    assert [v.shape for v in bf16.variables] == [v.shape for v in f32.variables]  # published weights fit too
    path = tf.train.Checkpoint(network=bf16).save(str(tmp_path / "bf16"))
    tf.train.Checkpoint(network=f32).restore(path).assert_consumed()  # the same object graph, every key used
    observations = tf.cast(tf.random.uniform((4, 84, 84, 4), 0, 255, tf.int32), tf.uint8)
    np.testing.assert_allclose(bf16(observations)[0], f32(observations)[0], atol=0.05)


def test_a_bfloat16_train_step_gives_a_finite_loss_and_moves_the_weights():
    network, agent = network_and_agent("bfloat16")
    experience = tensor_spec.sample_spec_nest(agent.training_data_spec, outer_dims=(16, 2))
    experience = tf.nest.map_structure(lambda t: t if t.dtype == tf.uint8 else tf.zeros_like(t), experience)
    before = [v.numpy().copy() for v in network.trainable_variables]
    loss = agent.train(experience).loss
    assert np.isfinite(float(loss))
    assert any(not np.array_equal(b, v.numpy()) for b, v in zip(before, network.trainable_variables, strict=True))


def test_bfloat16_with_an_lstm_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="--compute-dtype / DQN_COMPUTE_DTYPE: bfloat16 is for feed-forward"):
        resolve(CommonConfig, environ={}, flags={"compute_dtype": "bfloat16", "lstm_size": "32"})


def test_this_machine_is_asked_whether_it_computes_bfloat16_natively():
    from dqn.model.networks import fast_bfloat16

    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        flags = set(next(line for line in handle if line.startswith("flags")).split(":", 1)[1].split())
    assert fast_bfloat16() == bool({"amx_bf16", "avx512_bf16"} & flags)


@pytest.mark.parametrize("native, lstm_size, expected", [(True, None, "bfloat16"), (False, None, "float32"),
                                                          (True, (32,), "float32")])
def test_auto_computes_in_bfloat16_only_where_the_machine_does_natively_and_the_network_is_feed_forward(
        monkeypatch, native, lstm_size, expected):
    from dqn.model import networks

    monkeypatch.setattr(networks, "fast_bfloat16", lambda: native)  # the machine's answer; the rule is under test
    config = resolve(CommonConfig, environ={}, flags={"compute_dtype": "auto"})
    assert networks.resolved_compute_dtype(dataclasses.replace(config, lstm_size=lstm_size)) == expected


def test_auto_builds_the_network_this_machine_computes_fastest():
    from dqn.model.networks import fast_bfloat16

    network, _ = network_and_agent("auto")
    network.create_variables()
    convs = [layer for layer in network.layers[0].layers if isinstance(layer, tf.keras.layers.Conv2D)]
    assert {layer.compute_dtype for layer in convs} == {"bfloat16" if fast_bfloat16() else "float32"}
