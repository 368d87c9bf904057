"""The collect and greedy policies as one graph call per batch of envs (networks the numpy mirror cannot copy).

Observations and actions cross the Python<->TF boundary through `graph_io` buffers, not as tensor arguments
and results (see docs/design.md, "Python<->TF boundary and memory").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.model.graph_io import HostInput, HostOutput


def batched_actions(policy, batch_size: int | None = None) -> Callable[[ts.TimeStep], np.ndarray]:
    """Numpy TimeStep of N envs -> numpy actions, one graph call for the whole batch.

    A stateful (RNN) policy keeps one state per env between calls (`batch_size` envs); the network resets
    an env's state itself when that env's step is FIRST, so episode starts need no bookkeeping here.
    """
    if not policy.policy_state_spec:
        graphs: dict[tuple, Callable[[object], np.ndarray]] = {}

        def act(time_step: ts.TimeStep) -> np.ndarray:
            batch = int(np.shape(tf.nest.flatten(time_step.observation)[0])[0])
            if batch not in graphs:  # one graph per batch size (host buffers have fixed shapes)
                graphs[batch] = _feed_forward_actions(policy, batch)
            return graphs[batch](time_step.observation)

        return act

    if batch_size is None:
        raise ValueError("a stateful policy needs batch_size (one policy state per env)")
    state = [policy.get_initial_state(batch_size)]

    @tf.function(autograph=False)
    def act_with_state(step_type, reward, discount, observation, policy_state):
        step = policy.action(ts.TimeStep(step_type, reward, discount, observation), policy_state)
        return step.action, step.state

    def act_stateful(time_step: ts.TimeStep) -> np.ndarray:
        action, state[0] = act_with_state(*time_step, state[0])
        return action.numpy()

    return act_stateful


def _feed_forward_actions(policy, batch: int) -> Callable[[object], np.ndarray]:
    """Observations of `batch` envs -> actions, one graph call that takes and returns no tensor.

    Only the observation goes in: a feed-forward Q-network reads nothing else of the TimeStep, and converting
    the three other arguments cost CPU on every call. Observations (one buffer per part of a nested observation)
    and actions move through `dqn.model.graph_io` buffers, not as tensor arguments and results (see
    docs/design.md, "Python<->TF boundary and memory").
    """
    observation_spec = policy.time_step_spec.observation
    inputs = [HostInput((batch, *spec.shape), spec.dtype) for spec in tf.nest.flatten(observation_spec)]
    actions = HostOutput((batch, *policy.action_spec.shape), policy.action_spec.dtype)
    nested = tf.nest.is_nested(observation_spec)

    @tf.function(autograph=False)
    def act():
        observation = tf.nest.pack_sequence_as(observation_spec, [part.read() for part in inputs])
        batch_shape = tf.shape(tf.nest.flatten(observation)[0])[:1]
        actions.write(policy.action(ts.TimeStep(tf.fill(batch_shape, tf.constant(ts.StepType.MID, tf.int32)),
                                                tf.zeros(batch_shape, tf.float32), tf.ones(batch_shape, tf.float32),
                                                observation)).action)

    def call(observation) -> np.ndarray:
        if nested:
            for part, value in zip(inputs, tf.nest.flatten(observation), strict=True):
                part.set(value)
        else:
            inputs[0].set(observation)
        act()
        return actions.value.copy()

    return call


def batched_actions_and_q_values(policy, network) -> Callable[[ts.TimeStep], tuple[np.ndarray, np.ndarray]]:
    """Like `batched_actions` (feed-forward policies), also returning the Q-values [N, actions] of the observations.

    The actor needs them for its own TD errors (initial_priority=td_error); one graph call for both.
    """
    @tf.function(autograph=False)
    def act(step_type, reward, discount, observation):
        action = policy.action(ts.TimeStep(step_type, reward, discount, observation)).action
        q_values, _ = network(observation, step_type=step_type, training=False)
        return action, q_values

    def act_and_q(time_step: ts.TimeStep) -> tuple[np.ndarray, np.ndarray]:
        action, q_values = act(*time_step)
        return action.numpy(), q_values.numpy()

    return act_and_q
