"""Evaluation protocol: Nature DQN's epsilon 0.05 and 5-minute cap on Atari, greedy elsewhere (real envs)."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.model.flat_weights import FlatWeights
from dqn.resolve import resolved_builder
from dqn.settings.config import EvaluatorConfig
from dqn.settings.loading import ConfigError, resolve
from evaluator import evaluate
from evaluator.evaluate import evaluation_protocol, make_episodes

BREAKOUT = "ALE/Breakout-v5"


def protocol(**settings):
    """The evaluation protocol of an evaluator's settings (observation history decided: 1; no action mask)."""
    return evaluation_protocol(EvaluatorConfig(observation_history=1, action_mask="none", **settings))


def test_classic_control_evaluates_greedily_with_the_training_limit():
    epsilon, options = protocol()
    assert epsilon == 0.0 and options.max_episode_steps == 0
    epsilon, options = protocol(max_episode_steps=200)
    assert epsilon == 0.0 and options.max_episode_steps == 200


def test_atari_evaluates_at_epsilon_005_for_5_minutes_of_play():
    preset = resolve(EvaluatorConfig, environ={}, flags={"preset": "breakout"})
    epsilon, options = evaluation_protocol(dataclasses.replace(preset, observation_history=1, action_mask="none"))
    assert epsilon == 0.05 and options.max_episode_steps == 18_000 // 4  # not the training cap of 27,000
    assert protocol(env_id=BREAKOUT, atari_frame_skip=5)[1].max_episode_steps == 3_600
    # A shorter training cap stays the cap.
    assert protocol(env_id=BREAKOUT, max_episode_steps=100)[1].max_episode_steps == 100


def test_explicit_settings_win():
    epsilon, options = protocol(env_id=BREAKOUT, eval_epsilon=0.0, eval_max_episode_steps=100)
    assert epsilon == 0.0 and options.max_episode_steps == 100
    assert protocol(eval_epsilon=0.2)[0] == 0.2


def test_an_env_without_an_episode_limit_gets_one_for_evaluation(monkeypatch):
    endless = "tests.user_envs:Endless-v0"
    cap = protocol(env_id=endless)[1].max_episode_steps
    assert cap == evaluate.UNLIMITED_ENV_EVAL_STEPS
    assert protocol(env_id=endless, eval_max_episode_steps=70)[1].max_episode_steps == 70
    assert protocol(env_id=endless, max_episode_steps=90)[1].max_episode_steps == 90
    # An evaluation of it ends (here at a cap made small to keep the test short).
    monkeypatch.setattr(evaluate, "UNLIMITED_ENV_EVAL_STEPS", 50)
    config = EvaluatorConfig(env_id=endless, fc_layer_params=(8,), eval_episodes=2)
    builder = resolved_builder(config)
    episodes = make_episodes(builder.config, builder)
    episodes.load(FlatWeights(builder.agent.policy_variables).read())
    assert episodes.run(1)["average_episode_length"] == 50.0
    episodes.close()


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_eval_epsilon_is_a_probability(value):
    with pytest.raises(ConfigError, match="--eval-epsilon / DQN_EVAL_EPSILON"):
        resolve(EvaluatorConfig, environ={}, flags={"eval_epsilon": value})


def never_fire(bundle) -> list[np.ndarray]:
    """Weights whose Q-values are the output bias alone, highest for NOOP: a policy that never serves the ball."""
    variables = [np.zeros(v.shape, np.float32) for v in bundle.policy_variables]
    variables[-1] = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    return variables


def test_a_breakout_policy_that_never_fires_no_longer_stalls_the_evaluation():
    tf.random.set_seed(1)
    small = {"env_id": BREAKOUT, "conv_layer_params": (8, 8, 8), "fc_layer_params": (8,), "eval_episodes": 2}
    builder = resolved_builder(EvaluatorConfig(**small))
    bundle = builder.agent
    weights = never_fire(bundle)
    FlatWeights(bundle.policy_variables).assign(weights)
    # Greedy, the ball is never served: every episode runs into the cap.
    greedy = make_episodes(dataclasses.replace(builder.config, eval_epsilon=0.0, eval_max_episode_steps=300), builder)
    greedy.load(weights)
    assert greedy.run(7) == {"average_return": 0.0, "average_episode_length": 300.0}
    greedy.close()
    # The Atari protocol: random actions serve the ball, lives are lost, episodes end well before 4,500 steps.
    protocol = make_episodes(builder.config, builder)
    protocol.load(weights)
    length = protocol.run(7)["average_episode_length"]
    assert 0 < length < 4_500
    protocol.close()


def test_numpy_loop_repeats_its_random_actions_for_the_same_seed():
    builder = resolved_builder(EvaluatorConfig(fc_layer_params=(16,)))
    bundle = builder.agent
    config = dataclasses.replace(builder.config, eval_epsilon=0.5, eval_episodes=4)
    episodes = make_episodes(config, builder)
    episodes.load(FlatWeights(bundle.policy_variables).read())
    first = episodes.run(3)
    assert episodes.run(3) == first
    assert any(episodes.run(seed) != first for seed in (4, 5, 6))
    episodes.close()
