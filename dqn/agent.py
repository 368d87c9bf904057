"""Agent construction from config: Q-network, DqnAgent, specs and the replay layout they fix.

Every role calls `build_agent(config)` and gets identical variables and signatures, derived
from the config alone (the env's spaces come from `gym.make`, not from another role's files).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network, q_rnn_network
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from dqn.config import CommonConfig
from dqn.config_loading import ConfigError
from dqn.envs import EnvOptions, env_specs
from dqn.graph_io import HostInput, HostOutput
from dqn.replay_layout.layout import ReplayLayout


@dataclasses.dataclass
class AgentBundle:
    """An agent plus the specs the roles need; `epsilon` is the collect policy's live epsilon."""

    agent: dqn_agent.DqnAgent
    time_step_spec: ts.TimeStep
    action_spec: tensor_spec.BoundedTensorSpec
    train_step: tf.Variable
    epsilon: tf.Variable
    reward_threshold: float | None
    q_network: object
    layout: ReplayLayout
    replay_data_spec: object  # one step of one replay item (layout.item_step_spec of the collect_data_spec)

    @property
    def policy_variables(self) -> list[tf.Variable]:
        """Variables of the greedy/collect policy (the Q-network's), in a fixed order."""
        return list(self.agent.policy.variables())


def epsilon_at(config: CommonConfig, train_step: int) -> float:
    """Linear epsilon decay over train steps (the notebook's PolynomialDecay with power 1)."""
    fraction = min(1.0, max(0, train_step) / config.epsilon_decay_steps)
    return config.epsilon_start + fraction * (config.epsilon_end - config.epsilon_start)


def check_network_input(config: CommonConfig, observation_spec) -> None:
    """Conv layers need image observations (H, W, C) and images need conv layers; ConfigError otherwise."""
    image = len(observation_spec.shape) == 3
    if config.conv_layer_params is not None and not image:
        raise ConfigError("conv_layer_params", f"needs image observations (height, width, channels); env "
                                               f"{config.env_id!r} observes shape {observation_spec.shape}: "
                                               "leave it unset (none) for an MLP")
    if config.conv_layer_params is None and image:
        raise ConfigError("conv_layer_params", f"env {config.env_id!r} observes images {observation_spec.shape}: "
                                               "set conv layers, e.g. 32,8,4,64,4,2,64,3,1 (or --preset breakout)")


def conv_network_kwargs(config: CommonConfig) -> dict:
    """QNetwork arguments of a conv net (none for an MLP): uint8 observations are scaled to [0, 1] in the network.

    Scaling inside the network (the book's Lambda preprocessing layer) lets observations travel and sit in
    replay as uint8, a quarter of float32's bytes.
    """
    if config.conv_layer_params is None:
        return {}
    scale = tf.keras.layers.Lambda(lambda observation: tf.cast(observation, tf.float32) / 255.0)
    return {"preprocessing_layers": scale, "conv_layer_params": config.conv_layers()}


#: Bounds above this are "unbounded" in practice (some envs use float32's max); such features stay unscaled.
LARGEST_SCALED_BOUND = 1e6


def observation_scale(observation_spec, narrow_only: bool = False) -> np.ndarray | None:
    """Per-feature factors that bring finite Box bounds to [-1, 1]: 1 / max(|low|, |high|), 1 where unbounded.

    `narrow_only`: only features bounded within 1 are scaled (up); wider bounds are often loose caps (a max speed)
    that dividing by would shrink typical values far below 1. None when no feature would change.
    """
    shape = tuple(observation_spec.shape)
    low = np.broadcast_to(np.asarray(observation_spec.minimum, np.float64), shape)
    high = np.broadcast_to(np.asarray(observation_spec.maximum, np.float64), shape)
    bound = np.maximum(np.abs(low), np.abs(high))
    scalable = np.isfinite(bound) & (bound > 0) & (bound <= (1.0 if narrow_only else LARGEST_SCALED_BOUND))
    scale = np.ones(shape, np.float32)
    scale[scalable] = 1.0 / bound[scalable]
    return None if np.all(scale == 1.0) else scale


def mlp_network_kwargs(config: CommonConfig, observation_spec) -> dict:
    """QNetwork arguments of an MLP: with observation_scaling bounds, a Rescaling layer in front of the layers.

    Why in the network: replay, actors and exported policies all keep raw observations, and every role's
    network agrees because the factors come from the env's spec alone.
    """
    mode = config.observation_scaling
    scale = observation_scale(observation_spec, narrow_only=mode == "narrow") if mode != "none" else None
    if scale is None:
        return {}
    return {"preprocessing_layers": tf.keras.layers.Rescaling(scale.tolist(), name="observation_scaling")}


def make_q_network(config: CommonConfig, observation_spec, action_spec):
    """QNetwork (MLP or conv), or QRnnNetwork when lstm_size is set (the dense layers after the LSTM).

    Why after: an LSTM's output is tanh-bounded, so Q-values read straight off it (one linear layer) can only
    reach returns in the tens through slowly growing weights; a ReLU MLP between the LSTM and the Q-values
    scales freely, as in the feed-forward network.
    """
    if config.conv_layer_params is None:
        input_kwargs = mlp_network_kwargs(config, observation_spec)
    else:
        input_kwargs = conv_network_kwargs(config)
    if config.lstm_size:
        return q_rnn_network.QRnnNetwork(observation_spec, action_spec, input_fc_layer_params=None,
                                         lstm_size=config.lstm_size, output_fc_layer_params=config.fc_layer_params,
                                         **input_kwargs)
    return q_network.QNetwork(observation_spec, action_spec, fc_layer_params=config.fc_layer_params, **input_kwargs)


def reinitialize_q_networks(bundle: AgentBundle, config: CommonConfig) -> None:
    """Fresh initial weights for the agent's Q-network, and the target network set to the same weights.

    A freshly built network of the same config supplies them (its layers' own initializers), so every layer
    kind starts as a new run would. The optimizer's moments are kept: they rescale steps, they hold no policy.
    """
    fresh = make_q_network(config, bundle.time_step_spec.observation, bundle.action_spec)
    fresh.create_variables()
    for network in (bundle.agent._q_network, bundle.agent._target_q_network):  # noqa: SLF001 - no public setter
        for target, source in zip(network.variables, fresh.variables, strict=True):
            target.assign(source)


def build_agent(config: CommonConfig) -> AgentBundle:
    """QNetwork + DqnAgent (or DdqnAgent) from config, initialized; the same structure in every role."""
    observation_array_spec, action_array_spec, reward_threshold = env_specs(config.env_id,
                                                                            EnvOptions.from_config(config))
    check_network_input(config, observation_array_spec)
    observation_spec = tensor_spec.from_spec(observation_array_spec)
    action_spec = tensor_spec.from_spec(action_array_spec)
    time_step_spec = ts.time_step_spec(observation_spec)
    network = make_q_network(config, observation_spec, action_spec)
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
        n_step_update=config.n_step_update,
        train_step_counter=train_step,
    )
    agent.initialize()
    layout = ReplayLayout.from_config(config)
    return AgentBundle(agent, time_step_spec, action_spec, train_step, epsilon, reward_threshold, network, layout,
                       layout.item_step_spec(agent.collect_data_spec))


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
