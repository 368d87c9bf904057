"""Plain DQN's target max from one pass of the target network: TF-Agents' value, at half its target passes.

Real agents of real settings (CartPole, a mask in a Dict observation, a recurrent Q-network), checked against
TF-Agents' own DqnAgent target on the same agent and batch.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.specs import tensor_spec

import tests.action_envs  # noqa: F401 - registers the masked envs
from dqn.model.agent import PlainDqnAgent
from dqn.resolve import resolved_builder
from dqn.settings.config import LearnerConfig


def agent_of(env_id: str, **settings):
    agent = resolved_builder(LearnerConfig(env_id=env_id, batch_size=8, **settings)).agent.agent
    for variable in agent._target_q_network.variables:  # target weights unlike the online ones
        variable.assign(variable + tf.random.stateless_normal(variable.shape, seed=(1, 2), stddev=0.3))
    return agent


def next_time_steps(agent, outer_dims=(16,)):
    """Random next time steps of the agent's spec, mid-episode, observations of order 1, masks of 0/1 mixed."""
    steps = tensor_spec.sample_spec_nest(agent.time_step_spec, outer_dims=outer_dims, seed=7)
    observation = tf.nest.map_structure(
        lambda part: tf.cast(tf.random.stateless_uniform(part.shape, seed=(3, 4), minval=-1, maxval=2), part.dtype),
        steps.observation)
    if isinstance(observation, dict):  # a mask allows about half the actions, the last one always
        shape = observation["action_mask"].shape
        mask = tf.random.stateless_uniform(shape, seed=(5, 6)) < 0.5
        mask = tf.concat([mask[..., :-1], tf.ones_like(mask[..., -1:])], axis=-1)
        observation = {**observation, "action_mask": tf.cast(mask, observation["action_mask"].dtype)}
    return steps._replace(observation=observation, step_type=tf.ones_like(steps.step_type))


@pytest.mark.parametrize("env_id, settings", [
    ("CartPole-v1", {}),
    ("tests.action_envs:DictMask-v0", {}),
    ("CartPole-v1", {"lstm_size": (8,), "train_sequence_length": 4}),
])
def test_the_one_pass_target_is_tf_agents_own_target_max(env_id, settings):
    agent = agent_of(env_id, **settings)
    assert type(agent) is PlainDqnAgent
    outer = (16, 4) if settings.get("lstm_size") else (16,)
    steps = next_time_steps(agent, outer)
    ours = agent._compute_next_q_values(steps, None)
    theirs = dqn_agent.DqnAgent._compute_next_q_values(agent, steps, None)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_a_masked_target_max_skips_the_masked_actions_and_a_row_that_allows_nothing_stays_finite():
    agent = agent_of("tests.action_envs:DictMask-v0")
    steps = next_time_steps(agent)
    mask = np.zeros((16, 6), np.int8)
    mask[:, 2] = 1  # only action 2 valid ...
    mask[0] = 0  # ... but in row 0, where nothing is
    steps = steps._replace(observation={**steps.observation, "action_mask": tf.constant(mask)})
    q_values = agent._target_q_network(agent._observation_and_action_constraint_splitter(steps.observation)[0])[0]
    ours = agent._compute_next_q_values(steps, None).numpy()
    np.testing.assert_allclose(ours[1:], q_values.numpy()[1:, 2], rtol=1e-6)
    assert np.isfinite(ours[0]) and ours[0] == pytest.approx(q_values.numpy()[0].max())


def matmuls(compute_next_q_values, agent, steps) -> int:
    """MatMul ops in the graph of one target computation (each dense layer of a pass is one)."""
    graph = tf.function(lambda: compute_next_q_values(agent, steps, None)).get_concrete_function().graph
    return sum(op.type == "MatMul" for op in graph.get_operations())


def test_a_train_step_runs_the_target_network_once_where_tf_agents_runs_it_twice():
    agent = agent_of("CartPole-v1")
    steps = next_time_steps(agent)
    layers = len(agent._target_q_network.variables) // 2  # kernel and bias per dense layer
    ours = matmuls(PlainDqnAgent._compute_next_q_values, agent, steps)
    theirs = matmuls(dqn_agent.DqnAgent._compute_next_q_values, agent, steps)
    assert (ours, theirs) == (layers, 2 * layers)
