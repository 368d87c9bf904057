"""The DqnAgent of a config: its Q-network, optimizer, counters and the collect policy's live epsilon.

`dqn/builder.py` makes it (`DqnBuilder.agent`); every role gets identical variables, derived from the settings
and the env's spec alone.
"""

from __future__ import annotations

import dataclasses
import functools

import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from dqn.model.actions import ValidActions, max_q_values_tf, taken_q_values_tf
from dqn.model.branching import BranchingDqnAgent
from dqn.model.networks import make_q_network
from dqn.settings.config import CommonConfig


@dataclasses.dataclass
class AgentBundle:
    """An agent plus the specs the roles need; `epsilon` is the collect policy's live epsilon.

    `config` is the one it was built from, settings decided from the env included (`DqnBuilder`); `valid_actions`
    says where the observation's mask of valid actions is and what the Q-network reads.
    """

    agent: dqn_agent.DqnAgent
    time_step_spec: ts.TimeStep
    action_spec: tensor_spec.BoundedTensorSpec
    train_step: tf.Variable
    epsilon: tf.Variable
    q_network: object
    config: CommonConfig
    valid_actions: ValidActions

    @property
    def policy_variables(self) -> list[tf.Variable]:
        """Variables of the greedy/collect policy (the Q-network's), in a fixed order."""
        return list(self.agent.policy.variables())


class _AdvantageLearning:
    """Advantage learning (Bellemare et al. 2016, "Increasing the action gap") on a TF-Agents DQN agent.

    The TD target of (s, a) is lowered by alpha x (max_b Q(s,b) - Q(s,a)), both from the target network. Every
    optimal action keeps its value and every other one sinks by up to alpha / (1 - alpha) times its gap, so an
    action that wastes a step (a no-op, worth gamma x V(s)) falls (1 - gamma) / (1 - alpha) x V(s) short of the
    best one instead of (1 - gamma) x V(s): at gamma 0.99 a gap the Q-network's own error no longer hides.
    The loss takes predictions minus targets, so the correction is added to the predicted Q(s, a) as a constant.
    The max and the gathered Q(s, a) come from `dqn.model.actions`; with a mask of valid actions, the max is over
    the actions valid in s (the agent's `observation_and_action_constraint_splitter` masks TF-Agents' own target max).
    """

    def __init__(self, *args, action_gap_alpha: float, **kwargs):
        self._action_gap_alpha = action_gap_alpha
        super().__init__(*args, **kwargs)

    def _compute_q_values(self, time_steps, actions, training=False):
        q_values = super()._compute_q_values(time_steps, actions, training=training)
        observation, mask = time_steps.observation, None
        if self._observation_and_action_constraint_splitter is not None:
            observation, mask = self._observation_and_action_constraint_splitter(observation)
        target_q_values, _ = self._target_q_network(observation, step_type=time_steps.step_type, training=False)
        taken = taken_q_values_tf(target_q_values, actions)
        gap = tf.cast(max_q_values_tf(target_q_values, mask) - taken, q_values.dtype)
        return q_values + self._action_gap_alpha * tf.stop_gradient(gap)


class _TargetMaxInOnePass:
    """Plain DQN's target max over the valid actions from one pass of the target network per train step.

    TF-Agents' DqnAgent runs the target network on the next observations, then again inside its target greedy
    policy to pick the action whose value it reads there: that value is the max of the first pass (ties read the
    same value). One pass saves a target network's forward pass on every sampled batch. A row whose mask allows
    nothing is a broken env promise (`dqn.model.actions`): its max is over every action.
    """

    def _compute_next_q_values(self, next_time_steps, info):
        del info
        observation, mask = next_time_steps.observation, None
        if self._observation_and_action_constraint_splitter is not None:
            observation, mask = self._observation_and_action_constraint_splitter(observation)
        q_values, _ = self._target_q_network(observation, step_type=next_time_steps.step_type)
        return max_q_values_tf(q_values, mask)


class PlainDqnAgent(_TargetMaxInOnePass, dqn_agent.DqnAgent):
    """`DqnAgent` (plain DQN targets) with its target max from one target pass."""


class AdvantageLearningDqnAgent(_AdvantageLearning, _TargetMaxInOnePass, dqn_agent.DqnAgent):
    """`DqnAgent` with advantage-learning targets (`action_gap_alpha`)."""


class AdvantageLearningDdqnAgent(_AdvantageLearning, dqn_agent.DdqnAgent):
    """`DdqnAgent` (double DQN) with advantage-learning targets (`action_gap_alpha`)."""


def agent_class(config: CommonConfig, valid: ValidActions):
    """The TF-Agents agent class of the settings (plain or double DQN, advantage learning where alpha > 0).

    Alpha shapes only the learner's TD targets, never the variables: every role builds the same policy whatever it
    is, so the roles of a run need not agree on it. Vector actions get the branching agent, which takes both itself.
    """
    if valid.action_shape:
        return functools.partial(BranchingDqnAgent, valid_actions=valid, double_dqn=config.double_dqn,
                                 action_gap_alpha=config.action_gap_alpha)
    if config.action_gap_alpha:
        chosen = AdvantageLearningDdqnAgent if config.double_dqn else AdvantageLearningDqnAgent
        return functools.partial(chosen, action_gap_alpha=config.action_gap_alpha)
    return dqn_agent.DdqnAgent if config.double_dqn else PlainDqnAgent


def reinitialize_q_networks(bundle: AgentBundle) -> None:
    """Fresh initial weights for the agent's Q-network, and the target network set to the same weights.

    A freshly built network of the bundle's config supplies them (its layers' own initializers), so every layer
    kind starts as a new run would. The optimizer's moments are kept: they rescale steps, they hold no policy.
    """
    fresh = make_q_network(bundle.config, bundle.valid_actions.network_observation(bundle.time_step_spec.observation),
                           bundle.action_spec)
    fresh.create_variables()
    for network in (bundle.agent._q_network, bundle.agent._target_q_network):  # noqa: SLF001 - no public setter
        for target, source in zip(network.variables, fresh.variables, strict=True):
            target.assign(source)


def valid_actions(config: CommonConfig, observation_spec, action_spec) -> ValidActions:
    """The run's `ValidActions`: its action layout, and its mask where `action_mask` (resolved) reads one."""
    key = None if config.action_mask in ("none", "auto") else config.action_mask_key
    return ValidActions.of(observation_spec, action_spec, key, config.action_mask_input)


def build_agent(config: CommonConfig, observation_array_spec, action_array_spec) -> AgentBundle:
    """QNetwork + DqnAgent (or DdqnAgent) for the env's array specs, initialized; the same in every role.

    With a mask of valid actions the network reads the observation without it (unless `action_mask_input`), and
    the agent's splitter hands the mask to TF-Agents' greedy and random actions and to the target's max.
    """
    observation_spec = tensor_spec.from_spec(observation_array_spec)
    action_spec = tensor_spec.from_spec(action_array_spec)
    time_step_spec = ts.time_step_spec(observation_spec)
    valid = valid_actions(config, observation_spec, action_spec)
    network = make_q_network(config, valid.network_observation(observation_spec), action_spec)
    train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    epsilon = tf.Variable(config.epsilon_start, dtype=tf.float32, trainable=False, name="epsilon")
    loss = common.element_wise_huber_loss if config.td_loss == "huber" else common.element_wise_squared_loss
    agent = agent_class(config, valid)(
        time_step_spec,
        action_spec,
        q_network=network,
        observation_and_action_constraint_splitter=valid.splitter(),
        optimizer=tf.keras.optimizers.Adam(learning_rate=config.learning_rate),
        epsilon_greedy=lambda: epsilon,
        gamma=config.gamma,
        td_errors_loss_fn=loss,
        target_update_period=config.target_update_period,
        target_update_tau=config.target_update_tau,
        gradient_clipping=config.gradient_clipping,
        n_step_update=config.n_step_update,
        train_step_counter=train_step,
    )
    agent.initialize()
    return AgentBundle(agent, time_step_spec, action_spec, train_step, epsilon, network, config, valid)


def illegal_target_actions_tf(bundle: AgentBundle, time_step: ts.TimeStep) -> tf.Tensor:
    """How many of the actions the TD target bootstraps from at these observations their mask forbids (int32).

    The action is the one the agent's target takes: the target network's greedy action, the online network's with
    double DQN. 0 where the observations hold no mask.
    """
    valid = bundle.valid_actions
    mask = valid.mask_tf(time_step.observation)
    if mask is None:
        return tf.constant(0, tf.int32)
    agent = bundle.agent
    greedy = agent.policy if bundle.config.double_dqn else agent._target_greedy_policy  # noqa: SLF001 - no accessor
    indices = tf.cast(greedy.action(time_step).action, tf.int32) - valid.minimum
    mask = tf.broadcast_to(mask, tf.concat([tf.shape(indices)[:1], valid.q_shape], axis=0))
    allowed = tf.gather(mask, indices, axis=-1, batch_dims=indices.shape.rank)
    rows = tf.reduce_all(tf.reshape(allowed, [tf.shape(indices)[0], -1]), axis=1)
    return tf.reduce_sum(tf.cast(tf.logical_not(rows), tf.int32))
