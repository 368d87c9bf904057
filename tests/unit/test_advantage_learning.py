"""action_gap_alpha: advantage-learning TD errors on the real agent, checked against the formula by hand.

A plain setting: 0 (plain DQN targets) unless given; the resolve step never decides it, and a run record or a
published settings table that carries a value decided by an older version still loads.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.specs import tensor_spec

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.model.agent import AdvantageLearningDdqnAgent, AdvantageLearningDqnAgent, PlainDqnAgent
from dqn.resolve import adopt_run_settings, resolve_run, resolve_settings, resolved_builder
from dqn.settings.config import LearnerConfig, LocalConfig
from dqn.settings.loading import ConfigError, resolve, to_dict

GAMMA = 0.99


def agent_of(alpha: float, double_dqn: bool = False):
    config = LearnerConfig(env_id="CartPole-v1", action_gap_alpha=alpha, double_dqn=double_dqn, gamma=GAMMA,
                           batch_size=8)
    return resolved_builder(config).agent.agent


def transitions(agent, steps: int = 2):
    experience = tensor_spec.sample_spec_nest(agent.training_data_spec, outer_dims=(8, steps), seed=3)
    # CartPole's Box is unbounded in two features: observations of order 1, mid-episode steps with discount 1
    observation = tf.random.stateless_uniform(experience.observation.shape, seed=(4, 5), minval=-1, maxval=1)
    return experience._replace(observation=observation, step_type=tf.ones_like(experience.step_type),
                               next_step_type=tf.ones_like(experience.next_step_type),
                               discount=tf.ones_like(experience.discount))


def perturb_target_network(agent) -> None:
    """Target weights unlike the online ones, so a mix-up of the two networks shows in the TD errors."""
    for variable in agent._target_q_network.variables:
        variable.assign(variable + tf.random.stateless_normal(variable.shape, seed=(1, 2), stddev=0.3))


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_the_td_error_is_the_dqn_one_lowered_by_alpha_times_the_target_networks_action_gap(alpha):
    agent = agent_of(alpha)
    perturb_target_network(agent)
    experience = transitions(agent)
    td_error = agent._loss(experience, td_errors_loss_fn=agent._td_errors_loss_fn, gamma=GAMMA).extra.td_error

    observation, next_observation = experience.observation[:, 0], experience.observation[:, 1]
    actions = tf.cast(experience.action[:, 0], tf.int32)
    online_now = agent._q_network(observation)[0].numpy()
    target_now = agent._target_q_network(observation)[0].numpy()
    target_next = agent._target_q_network(next_observation)[0].numpy()
    rows = np.arange(len(actions))
    rewards = experience.reward[:, 0].numpy()
    gap = target_now.max(axis=1) - target_now[rows, actions]
    expected = rewards + GAMMA * target_next.max(axis=1) - alpha * gap - online_now[rows, actions]
    assert gap.max() > 0.05  # the correction is exercised, not zero
    np.testing.assert_allclose(td_error.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_the_agent_class_follows_alpha_and_double_dqn():
    assert type(agent_of(0.0)) is PlainDqnAgent
    assert type(agent_of(0.0, double_dqn=True)) is dqn_agent.DdqnAgent
    assert type(agent_of(0.9)) is AdvantageLearningDqnAgent
    assert type(agent_of(0.9, double_dqn=True)) is AdvantageLearningDdqnAgent


@pytest.mark.parametrize("extra, steps", [({"n_step_update": 3}, 4),
                                          ({"lstm_size": (8,), "train_sequence_length": 4}, 4)])
def test_advantage_learning_trains_with_n_step_returns_and_a_recurrent_q_network(extra, steps):
    config = LearnerConfig(env_id="CartPole-v1", action_gap_alpha=0.9, batch_size=8, **extra)
    agent = resolved_builder(config).agent.agent
    experience = transitions(agent, steps)
    experience = experience._replace(reward=tf.ones_like(experience.reward))
    assert np.isfinite(float(agent.train(experience).loss))


def test_the_flag_reaches_the_learners_targets_and_plain_targets_are_the_default():
    flagged = resolve(LearnerConfig, environ={}, flags={"action_gap_alpha": "0.9", "fc_layer_params": "8"})
    agent = resolved_builder(flagged).agent.agent
    assert type(agent) is AdvantageLearningDqnAgent and agent._action_gap_alpha == 0.9
    default = resolve(LearnerConfig, environ={}, flags={"fc_layer_params": "8"})
    assert default.action_gap_alpha == 0.0 and type(resolved_builder(default).agent.agent) is PlainDqnAgent
    with pytest.raises(ConfigError) as error:  # no auto any more: `none` is not a number
        resolve(LearnerConfig, environ={}, flags={"action_gap_alpha": "none"})
    assert error.value.field_name == "action_gap_alpha"


def test_the_resolve_step_keeps_the_value_given_even_where_actions_change_nothing(caplog):
    caplog.set_level("INFO")
    room = "tests.user_envs:IdleRoom-v0"  # three of its five actions change nothing and earn nothing
    assert resolve_settings(LearnerConfig(env_id=room, fc_layer_params=(8,))).action_gap_alpha == 0.0
    assert resolve_settings(LearnerConfig(env_id=room, fc_layer_params=(8,), action_gap_alpha=0.9)
                            ).action_gap_alpha == 0.9
    assert "action_gap_alpha" not in caplog.text and "observation_history auto" in caplog.text


def test_a_run_record_with_an_alpha_decided_by_an_older_version_loads_and_this_starts_value_is_used(tmp_path):
    record = tmp_path / "config.json"
    older = {**to_dict(LocalConfig(observation_history=1, image_encoding="scaled", samples_per_insert=8.0,
                                   action_mask="none")), "action_gap_alpha": 0.9}
    record.write_text(json.dumps(older))
    resolved = resolve_run(LocalConfig(fc_layer_params=(8,)), str(record))
    assert resolved.action_gap_alpha == 0.0 and resolved.samples_per_insert == 8.0  # the auto one kept as recorded
    assert json.loads(record.read_text())["action_gap_alpha"] == 0.0
    record.write_text(json.dumps(older))
    assert resolve_run(LocalConfig(fc_layer_params=(8,), action_gap_alpha=0.5), str(record)).action_gap_alpha == 0.5


def test_settings_published_by_an_older_version_with_a_decided_alpha_are_adopted_and_the_role_keeps_its_own():
    published = {**to_dict(LearnerConfig(observation_history=1, image_encoding="scaled", samples_per_insert=8.0,
                                         action_mask="none")), "action_gap_alpha": 0.9}
    adopted = adopt_run_settings(LearnerConfig(), published, "an older replay server")
    assert adopted.samples_per_insert == 8.0 and adopted.action_gap_alpha == 0.0
    given = adopt_run_settings(LearnerConfig(action_gap_alpha=0.5), published, "an older replay server")
    assert given.action_gap_alpha == 0.5  # not a setting the run decides: no disagreement to refuse
