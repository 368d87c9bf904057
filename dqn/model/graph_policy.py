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
        graphs: dict[tuple, Callable[[np.ndarray], np.ndarray]] = {}

        def act(time_step: ts.TimeStep) -> np.ndarray:
            shape = tuple(np.shape(time_step.observation))
            if shape not in graphs:  # one graph per batch shape (host buffers have fixed shapes)
                graphs[shape] = _feed_forward_actions(policy, shape)
            return graphs[shape](time_step.observation)

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


def _feed_forward_actions(policy, observation_shape: tuple) -> Callable[[np.ndarray], np.ndarray]:
    """Observations of one batch shape -> actions, one graph call that takes and returns no tensor.

    Only the observation goes in: a feed-forward Q-network reads nothing else of the TimeStep, and converting
    the three other arguments cost CPU on every call. Observations and actions move through `dqn.graph_io` buffers,
    not as tensor arguments and results (see docs/design.md, "Python<->TF boundary and memory").
    """
    observations = HostInput(observation_shape, policy.time_step_spec.observation.dtype)
    actions = HostOutput(observation_shape[:1] + tuple(policy.action_spec.shape), policy.action_spec.dtype)

    @tf.function(autograph=False)
    def act():
        observation = observations.read()
        batch = tf.shape(observation)[:1]
        actions.write(policy.action(ts.TimeStep(tf.fill(batch, tf.constant(ts.StepType.MID, tf.int32)),
                                                tf.zeros(batch, tf.float32), tf.ones(batch, tf.float32),
                                                observation)).action)

    def call(observation: np.ndarray) -> np.ndarray:
        observations.set(observation)
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
