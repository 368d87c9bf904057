"""Agent construction from config: Q-network, DqnAgent, specs and Reverb table signatures.

Every role calls `build_agent(config)` and gets identical variables and signatures, derived
from the config alone (the env's spaces come from `gym.make`, not from another role's files).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from dqn.config import SEQUENCE_LENGTH, CommonConfig
from dqn.envs import env_specs

#: Keys of the single item in the `variables` table.
POLICY_VARIABLES_KEY = "policy_variables"
TRAIN_STEP_KEY = "train_step"


@dataclasses.dataclass
class AgentBundle:
    """An agent plus the specs the roles need; `epsilon` is the collect policy's live epsilon."""

    agent: dqn_agent.DqnAgent
    time_step_spec: ts.TimeStep
    action_spec: tensor_spec.BoundedTensorSpec
    train_step: tf.Variable
    epsilon: tf.Variable
    reward_threshold: float | None

    @property
    def policy_variables(self) -> list[tf.Variable]:
        """Variables of the greedy/collect policy (the Q-network's), in a fixed order."""
        return list(self.agent.policy.variables())


def epsilon_at(config: CommonConfig, train_step: int) -> float:
    """Linear epsilon decay over train steps (the notebook's PolynomialDecay with power 1)."""
    fraction = min(1.0, max(0, train_step) / config.epsilon_decay_steps)
    return config.epsilon_start + fraction * (config.epsilon_end - config.epsilon_start)


def build_agent(config: CommonConfig) -> AgentBundle:
    """QNetwork + DqnAgent (or DdqnAgent) from config, initialized; the same structure in every role."""
    observation_array_spec, action_array_spec, reward_threshold = env_specs(config.env_id)
    observation_spec = tensor_spec.from_spec(observation_array_spec)
    action_spec = tensor_spec.from_spec(action_array_spec)
    time_step_spec = ts.time_step_spec(observation_spec)
    network = q_network.QNetwork(observation_spec, action_spec, fc_layer_params=config.fc_layer_params)
    train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    epsilon = tf.Variable(config.epsilon_start, dtype=tf.float32, trainable=False, name="epsilon")
    loss = common.element_wise_huber_loss if config.td_loss == "huber" else common.element_wise_squared_loss
    agent_class = dqn_agent.DdqnAgent if config.double_dqn else dqn_agent.DqnAgent
    agent = agent_class(
        time_step_spec,
        action_spec,
        q_network=network,
        optimizer=tf.keras.optimizers.Adam(learning_rate=config.learning_rate),
        epsilon_greedy=lambda: epsilon,
        gamma=config.gamma,
        td_errors_loss_fn=loss,
        target_update_period=config.target_update_period,
        target_update_tau=config.target_update_tau,
        gradient_clipping=config.gradient_clipping,
        train_step_counter=train_step,
    )
    agent.initialize()
    return AgentBundle(agent, time_step_spec, action_spec, train_step, epsilon, reward_threshold)


def batched_actions(policy) -> Callable[[ts.TimeStep], np.ndarray]:
    """Numpy TimeStep of N envs -> numpy actions, one graph call for the whole batch (stateless policies)."""

    @tf.function(autograph=False)
    def act(step_type, reward, discount, observation):
        return policy.action(ts.TimeStep(step_type, reward, discount, observation)).action

    return lambda time_step: act(*time_step).numpy()


def replay_signature(bundle: AgentBundle) -> object:
    """Signature of one replay item: a Trajectory of SEQUENCE_LENGTH consecutive steps of one env."""
    return tensor_spec.add_outer_dim(tensor_spec.from_spec(bundle.agent.collect_data_spec), SEQUENCE_LENGTH)


def variables_signature(bundle: AgentBundle) -> dict[str, object]:
    """Signature of the single `variables` item: policy weights plus the train step they belong to."""
    return {
        POLICY_VARIABLES_KEY: [tf.TensorSpec(v.shape, v.dtype) for v in bundle.policy_variables],
        TRAIN_STEP_KEY: tf.TensorSpec((), tf.int64),
    }
