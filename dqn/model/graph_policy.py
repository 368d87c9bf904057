"""The collect and greedy policies as one graph call per batch of envs (networks the numpy mirror cannot copy).

Observations and actions cross the Python<->TF boundary through `graph_io` buffers, not as tensor arguments
and results: tensors handed between Python and TF keep their memory for good (dqn/model/graph_io.py).

The actions are TF-Agents' own choice (its QPolicy, GreedyPolicy and EpsilonGreedyPolicy), not `dqn.model.actions`'s:
a mask of valid actions enters them through DqnAgent's `observation_and_action_constraint_splitter`. A branching
network's policies (dqn/model/branching.py) choose through `dqn.model.actions`.
`GraphQNetwork` returns Q-values only, of what the network reads of an observation; its callers choose through
`dqn.model.actions`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.model.actions import ValidActions
from dqn.model.flat_weights import FlatWeights
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


class _ObservationInputs:
    """Host buffers for a batch of observations (one per part of a nested observation), read in-graph."""

    def __init__(self, observation_spec, batch: int):
        self._spec = observation_spec
        self._parts = [HostInput((batch, *spec.shape), spec.dtype) for spec in tf.nest.flatten(observation_spec)]
        self._nested = tf.nest.is_nested(observation_spec)

    def set(self, observation) -> None:
        """The batch the next graph call reads."""
        if self._nested:
            for part, value in zip(self._parts, tf.nest.flatten(observation), strict=True):
                part.set(value)
        else:
            self._parts[0].set(observation)

    def read(self):
        """In graph code: the batch, shaped like the spec."""
        return tf.nest.pack_sequence_as(self._spec, [part.read() for part in self._parts])


def _feed_forward_actions(policy, batch: int) -> Callable[[object], np.ndarray]:
    """Observations of `batch` envs -> actions, one graph call that takes and returns no tensor.

    Only the observation goes in: a feed-forward Q-network reads nothing else of the TimeStep, and converting
    the three other arguments cost CPU on every call. Observations and actions move through `dqn.model.graph_io`
    buffers, not as tensor arguments and results, which would keep their memory for good.
    """
    inputs = _ObservationInputs(policy.time_step_spec.observation, batch)
    actions = HostOutput((batch, *policy.action_spec.shape), policy.action_spec.dtype)

    @tf.function(autograph=False)
    def act():
        observation = inputs.read()
        batch_shape = tf.shape(tf.nest.flatten(observation)[0])[:1]
        actions.write(policy.action(ts.TimeStep(tf.fill(batch_shape, tf.constant(ts.StepType.MID, tf.int32)),
                                                tf.zeros(batch_shape, tf.float32), tf.ones(batch_shape, tf.float32),
                                                observation)).action)

    def call(observation) -> np.ndarray:
        inputs.set(observation)
        act()
        return actions.value.copy()

    return call


class GraphQNetwork:
    """A feed-forward Q-network with the numpy mirror's interface (`q_values`, `set_weights`), run in one graph call.

    For networks the mirror cannot copy (conv, nested observations, branching): callers that step envs from Python
    (the evaluator's loop) use it as they use `HostQNetwork`, and no tensor crosses per call. `q_shape`: the Q-values
    of one observation (the network's own output where not given).
    """

    def __init__(self, network, variables: list[tf.Variable], q_shape: tuple[int, ...] | None = None):
        self._network = network
        self._q_shape = tuple(q_shape) if q_shape else (network.layers[-1].units,)
        self._weights = FlatWeights(variables)
        self._graphs: dict[int, Callable[[object], np.ndarray]] = {}

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """New weights: the policy's variable list as numpy arrays (what the `variables` table holds)."""
        self._weights.assign(weights)

    def q_values(self, observation) -> np.ndarray:
        """Q-values [N, actions] of N observations."""
        batch = int(np.shape(tf.nest.flatten(observation)[0])[0])
        if batch not in self._graphs:
            self._graphs[batch] = self._q_values_graph(batch)
        return self._graphs[batch](observation)

    def _q_values_graph(self, batch: int) -> Callable[[object], np.ndarray]:
        inputs = _ObservationInputs(self._network.input_tensor_spec, batch)
        q_values = HostOutput((batch, *self._q_shape), tf.float32)

        @tf.function(autograph=False)
        def compute():
            values, _ = self._network(inputs.read(), training=False)
            q_values.write(values)

        def call(observation) -> np.ndarray:
            inputs.set(observation)
            compute()
            return q_values.value.copy()

        return call


def batched_actions_and_q_values(policy, network, valid: ValidActions
                                 ) -> Callable[[ts.TimeStep], tuple[np.ndarray, np.ndarray]]:
    """Like `batched_actions` (feed-forward policies), also returning the Q-values [N, actions] of the observations.

    The actor needs them for its own TD errors (initial_priority=td_error); one graph call for both.
    """
    @tf.function(autograph=False)
    def act(step_type, reward, discount, observation):
        action = policy.action(ts.TimeStep(step_type, reward, discount, observation)).action
        q_values, _ = network(valid.network_observation(observation), step_type=step_type, training=False)
        return action, q_values

    def act_and_q(time_step: ts.TimeStep) -> tuple[np.ndarray, np.ndarray]:
        action, q_values = act(*time_step)
        return action.numpy(), q_values.numpy()

    return act_and_q
