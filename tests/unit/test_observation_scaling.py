"""Observation scaling: the factors come from the env's Box bounds, and the Q-network applies them to raw input."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import array_spec

from dqn.model.encoders import feature_scale
from dqn.resolve import resolved_builder
from dqn.settings.config import ActorConfig


def box(low, high) -> array_spec.BoundedArraySpec:
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    return array_spec.BoundedArraySpec(low.shape, np.float32, minimum=low, maximum=high)


def test_finite_bounds_map_to_unit_range_and_unbounded_features_pass_unchanged():
    # CartPole-v1's bounds: cart position 4.8, velocities unbounded, pole angle 0.418 rad.
    scale = feature_scale(box([-4.8, -np.inf, -0.41887903, -np.inf], [4.8, np.inf, 0.41887903, np.inf]), "bounds")
    np.testing.assert_allclose(scale, [1 / 4.8, 1.0, 1 / 0.41887903, 1.0], rtol=1e-6)
    # Asymmetric bounds (MountainCar's position) divide by the larger magnitude; float32's max counts as unbounded.
    big = np.finfo(np.float32).max
    np.testing.assert_allclose(feature_scale(box([-1.2, -0.07, -big], [0.6, 0.07, big]), "bounds"),
                               [1 / 1.2, 1 / 0.07, 1.0], rtol=1e-6)


def test_the_default_scales_only_features_bounded_within_one():
    scaled = resolved_builder(ActorConfig(fc_layer_params=(16,))).agent
    raw = resolved_builder(ActorConfig(fc_layer_params=(16,), observation_scaling="none")).agent
    for source, target in zip(scaled.policy_variables, raw.policy_variables, strict=True):
        target.assign(source)
    observation = np.random.default_rng(0).uniform(-3, 3, (64, 4)).astype(np.float32)
    expected, _ = raw.q_network(tf.constant(observation * np.float32([1, 1, 1 / 0.41887903, 1])), training=False)
    actual, _ = scaled.q_network(tf.constant(observation), training=False)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_narrow_scales_only_features_bounded_within_one():
    # CartPole: only the pole angle (0.418 rad) is scaled; Acrobot's cos/sin (1) and velocities (4 pi, 9 pi) are not.
    cartpole = box([-4.8, -np.inf, -0.41887903, -np.inf], [4.8, np.inf, 0.41887903, np.inf])
    np.testing.assert_allclose(feature_scale(cartpole, "narrow"), [1.0, 1.0, 1 / 0.41887903, 1.0],
                               rtol=1e-6)
    acrobot = box([-1, -1, -1, -1, -4 * np.pi, -9 * np.pi], [1, 1, 1, 1, 4 * np.pi, 9 * np.pi])
    assert feature_scale(acrobot, "narrow") is None


@pytest.mark.parametrize("low,high", [([-np.inf] * 3, [np.inf] * 3), ([-1.0, 0.0], [1.0, 1.0]), ([0.0], [0.0])],
                         ids=["unbounded", "already-unit", "zero-width"])
def test_no_scaling_layer_when_no_feature_would_change(low, high):
    assert feature_scale(box(low, high), "bounds") is None


def test_scaled_network_equals_the_unscaled_one_on_scaled_observations():
    scaled = resolved_builder(ActorConfig(fc_layer_params=(16,), observation_scaling="bounds")).agent
    raw = resolved_builder(ActorConfig(fc_layer_params=(16,), observation_scaling="none")).agent
    for source, target in zip(scaled.policy_variables, raw.policy_variables, strict=True):
        target.assign(source)
    observation = np.random.default_rng(0).uniform(-3, 3, (64, 4)).astype(np.float32)
    scale = feature_scale(scaled.time_step_spec.observation, "bounds")
    expected, _ = raw.q_network(tf.constant(observation * scale), training=False)
    actual, _ = scaled.q_network(tf.constant(observation), training=False)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    unscaled, _ = raw.q_network(tf.constant(observation), training=False)
    assert not np.allclose(actual.numpy(), unscaled.numpy(), atol=1e-3)  # the scale does change the Q-values
    # The target network (the agent's copy, given the online weights at initialize) scales its input too.
    target, _ = scaled.agent._target_q_network(tf.constant(observation), training=False)
    np.testing.assert_allclose(target.numpy(), actual.numpy(), rtol=1e-5, atol=1e-6)
