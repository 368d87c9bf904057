"""A branching Q-network and its agent: multi-discrete actions too many to number one by one.

Tavakoli, Pardo and Kormushev 2018, "Action Branching Architectures for Deep Reinforcement Learning" (BDQ): a shared
torso (the same input encoders and dense layers as the flat Q-network, dqn/model/encoders.py), a state value V(s)
and one advantage head per action dimension d; Q_d(s, a_d) = V(s) + A_d(s, a_d) - mean of A_d over d's values. Each
head here is one linear layer over the torso; the D heads are one Dense layer of D x n_max units, reshaped, whose
values past a narrower dimension's count are padding (`ValidActions.padding`) and never chosen.

Acting takes the best valid value of each dimension (dqn/model/actions.py, per dimension); exploration takes all D at
random together. Training follows the paper: one TD target per transition, y = r + gamma x the mean over dimensions
of Q-_d(s', a'_d), with a'_d each dimension's best valid value (chosen by the online network with double_dqn, as
the paper does, else by the target network), and the loss is the mean over dimensions of each head's TD loss against
y. Advantage learning's gap, where alpha > 0, is taken per dimension. The TD error handed to prioritized replay is
the mean over dimensions of |y - Q_d(s, a_d)|.

TF-Agents' DqnAgent takes scalar actions only, so `BranchingDqnAgent` keeps its training loop, target updates,
n-step transitions and loss weighting, and replaces what reads actions: the Q of the taken action, the next state's
value, the TD loss and the policies.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import encoding_network, network
from tf_agents.networks import utils as network_utils
from tf_agents.policies import tf_policy
from tf_agents.trajectories import policy_step

from dqn.model.actions import (
    ValidActions,
    greedy_actions_tf,
    max_q_values_tf,
    random_actions_tf,
    taken_q_values_tf,
)
from dqn.model.layer_norm import normalize_hidden_layers


class BranchingQNetwork(network.Network):
    """Shared torso, a state value and one advantage head per action dimension: Q-values [B, D, n_max]."""

    def __init__(self, input_tensor_spec, nvec, preprocessing_layers=None, preprocessing_combiner=None,
                 conv_layer_params=None, fc_layer_params=(256, 256), layer_norm=False, name="BranchingQNetwork"):
        super().__init__(input_tensor_spec=input_tensor_spec, state_spec=(), name=name)
        self._nvec = tuple(int(n) for n in nvec)
        self._width = max(self._nvec)
        self._torso = encoding_network.EncodingNetwork(
            input_tensor_spec, preprocessing_layers=preprocessing_layers,
            preprocessing_combiner=preprocessing_combiner, conv_layer_params=conv_layer_params,
            fc_layer_params=fc_layer_params)
        if layer_norm:
            normalize_hidden_layers(self._torso)
        # QNetwork's initializers for its Q-value layer: small weights, so the first Q-values are near -0.2.
        head = {"kernel_initializer": tf.random_uniform_initializer(minval=-0.03, maxval=0.03),
                "bias_initializer": tf.constant_initializer(-0.2)}
        self._value = tf.keras.layers.Dense(1, **head)
        self._advantages = tf.keras.layers.Dense(len(self._nvec) * self._width, **head)
        counts = np.asarray(self._nvec, np.float32)[:, None]
        self._padding = (np.arange(self._width)[None, :] < counts).astype(np.float32)
        self._counts = counts

    def call(self, observation, step_type=None, network_state=(), training=False):
        """Q-values [B, D, n_max]; a dimension's padding values hold its V(s) - mean advantage, never chosen."""
        state, network_state = self._torso(observation, step_type=step_type, network_state=network_state,
                                           training=training)
        advantages = tf.reshape(self._advantages(state, training=training), [-1, len(self._nvec), self._width])
        advantages *= self._padding
        mean = tf.reduce_sum(advantages, axis=-1, keepdims=True) / self._counts
        value = self._value(state, training=training)[:, :, None]
        return value + advantages - mean, network_state


class BranchingGreedyPolicy(tf_policy.TFPolicy):
    """Each dimension's best valid value (the mask of the observation and the padding)."""

    def __init__(self, time_step_spec, action_spec, q_network, valid: ValidActions, name=None):
        super().__init__(time_step_spec, action_spec, name=name)
        self._q_network = q_network
        self._valid = valid

    def _variables(self):
        return self._q_network.variables

    def _distribution(self, time_step, policy_state):
        q_values, _ = self._q_network(self._valid.network_observation(time_step.observation),
                                      step_type=time_step.step_type, training=False)
        actions = greedy_actions_tf(q_values, self._valid.mask_tf(time_step.observation), output_type=tf.int64)
        return policy_step.PolicyStep(tfp.distributions.Deterministic(actions), policy_state)


class BranchingEpsilonGreedyPolicy(tf_policy.TFPolicy):
    """With probability epsilon (a float or a callable) every dimension takes a uniformly random valid value."""

    def __init__(self, greedy: BranchingGreedyPolicy, epsilon, valid: ValidActions, name=None):
        super().__init__(greedy.time_step_spec, greedy.action_spec, name=name)
        self._greedy = greedy
        self._epsilon = epsilon
        self._valid = valid
        self._generator = tf.random.Generator.from_non_deterministic_state()

    def _variables(self):
        return self._greedy.variables()

    def _action(self, time_step, policy_state, seed):
        greedy = self._greedy.action(time_step, policy_state).action
        epsilon = self._epsilon() if callable(self._epsilon) else self._epsilon
        drawn = random_actions_tf(self._generator, tf.shape(greedy), self._valid.num_actions,
                                  self._valid.mask_tf(time_step.observation), dtype=greedy.dtype)
        explore = self._generator.uniform(tf.shape(greedy)[:1]) < tf.cast(epsilon, tf.float32)
        return policy_step.PolicyStep(tf.where(explore[:, None], drawn, greedy), policy_state)

    def _distribution(self, time_step, policy_state):
        raise NotImplementedError("epsilon-greedy branching actions are sampled by `action`")


class BranchingDqnAgent(dqn_agent.DqnAgent):
    """DqnAgent for vector actions of a `BranchingQNetwork` (the module docstring says how it trains)."""

    def __init__(self, *args, valid_actions: ValidActions, double_dqn: bool = False, action_gap_alpha: float = 0.0,
                 **kwargs):
        self._valid = valid_actions
        self._double = double_dqn
        self._alpha = action_gap_alpha
        super().__init__(*args, **kwargs)

    def _check_action_spec(self, action_spec):
        self._num_actions = self._valid.q_shape

    def _check_network_output(self, net, label):
        network_utils.check_single_floating_network_output(net.create_variables(), self._valid.q_shape, label)

    def _setup_policy(self, time_step_spec, action_spec, boltzmann_temperature, emit_log_probability):
        policy = BranchingGreedyPolicy(time_step_spec, action_spec, self._q_network, self._valid)
        self._target_greedy_policy = BranchingGreedyPolicy(time_step_spec, action_spec, self._target_q_network,
                                                           self._valid)
        return policy, BranchingEpsilonGreedyPolicy(policy, self._epsilon_greedy, self._valid)

    def _compute_q_values(self, time_steps, actions, training=False):
        observation = self._valid.network_observation(time_steps.observation)
        q_values, _ = self._q_network(observation, step_type=time_steps.step_type, training=training)
        taken = taken_q_values_tf(q_values, actions)  # [B, D]
        if not self._alpha:
            return taken
        target_q_values, _ = self._target_q_network(observation, step_type=time_steps.step_type, training=False)
        mask = self._valid.mask_tf(time_steps.observation)
        gap = max_q_values_tf(target_q_values, mask) - taken_q_values_tf(target_q_values, actions)
        return taken + self._alpha * tf.stop_gradient(gap)

    def _compute_next_q_values(self, next_time_steps, info):
        observation = self._valid.network_observation(next_time_steps.observation)
        mask = self._valid.mask_tf(next_time_steps.observation)
        target_q_values, _ = self._target_q_network(observation, step_type=next_time_steps.step_type)
        if self._double:
            online_q_values, _ = self._q_network(observation, step_type=next_time_steps.step_type)
            values = taken_q_values_tf(target_q_values, greedy_actions_tf(online_q_values, mask))
        else:
            values = max_q_values_tf(target_q_values, mask)
        return tf.reduce_mean(values, axis=-1)

    def _td_loss(self, q_values, next_q_values, rewards, discounts):
        targets = tf.stop_gradient(rewards + discounts * next_q_values)
        targets = tf.broadcast_to(targets[:, None], tf.shape(q_values))
        td_loss = tf.reduce_mean(self._td_errors_loss_fn(targets, q_values), axis=-1)
        return td_loss, tf.reduce_mean(tf.abs(targets - q_values), axis=-1)
