"""`DqnBuilder`: the one place that wires the service's parts together from the settings and the env's spec.

The way Acme's `DQNBuilder` does it: every role asks the builder for what it needs (the agent, the replay tables,
the actor's writer, the learner's dataset, the collect and evaluation policies), and the builder derives each from
the same two inputs, so the roles agree without reading each other's files and may start in any order. The
settings come resolved (dqn/resolve.py: nothing left at auto) and the builder never plays the env.
"""

from __future__ import annotations

import functools

import reverb
import tensorflow as tf

from dqn.envs.making import EnvOptions, EnvSpecs
from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.model.agent import AgentBundle, build_agent
from dqn.model.collect_policy import (
    CollectPolicy,
    GraphCollectPolicy,
    HeldRandomCollectPolicy,
    NumpyCollectPolicy,
    RandomCollectPolicy,
)
from dqn.model.exploration import HeldRandomActions
from dqn.model.graph_policy import GraphQNetwork
from dqn.model.numpy_policy import HostQNetwork
from dqn.model.policy_export import export_form
from dqn.remote.replay_client import ServerClients, check_signatures
from dqn.replay_layout import dataset
from dqn.replay_layout.layout import ReplayLayout
from dqn.settings.config import CommonConfig


class DqnBuilder:
    """Makes every part of a run from `config` (any role's settings, resolved) and the specs of its env.

    The agent is built on first use and then shared.
    """

    def __init__(self, config: CommonConfig, specs: EnvSpecs):
        if unresolved := config.unresolved():
            raise ValueError(f"settings {', '.join(unresolved)} are still auto: resolve them first "
                             "(dqn.resolve.resolve_settings)")
        self.config = config
        self.env_options = EnvOptions.from_config(config)
        self.observation_spec, self.action_spec, self.reward_threshold, self.action_form = specs
        self.layout = ReplayLayout.from_config(config)
        self._hold_states: dict[tuple[int, int], HeldRandomActions] = {}

    @functools.cached_property
    def agent(self) -> AgentBundle:
        """The DqnAgent with its Q-network and counters (built on first use, then the same object)."""
        return build_agent(self.config, self.observation_spec, self.action_spec)

    @property
    def replay_item_step_spec(self):
        """One step of one replay item: the agent's collect_data_spec as the layout stores it."""
        return self.layout.item_step_spec(self.agent.agent.collect_data_spec)

    def table_signatures(self) -> dict[str, object]:
        """Table name -> signature of the replay, variables and requests tables."""
        return self.layout.signatures(self.replay_item_step_spec, self.agent.policy_variables)

    def make_tables(self) -> list[reverb.Table]:
        """The Reverb tables the replay server serves."""
        return self.layout.make_tables(self.table_signatures(), self.config.samples_per_insert)

    def check_server_tables(self, clients: ServerClients, role: str) -> None:
        """Refuses (SpecMismatch) a server whose tables were built for other settings than this role's."""
        check_signatures(clients, self.table_signatures(), self.config, role)

    def make_writer(self, client: reverb.Client, num_envs: int):
        """The actor's replay writer for `num_envs` envs; every batch is checked against the env's specs."""
        return self.layout.make_writer(client, num_envs, self.observation_spec, self.action_spec)

    def make_dataset(self) -> tf.data.Dataset:
        """The learner's sampled replay items (as Reverb returns them; `layout.finish_batch` unpacks them)."""
        return dataset.sample_dataset(self.config, self.layout, self.replay_item_step_spec)

    def make_envs(self, num_envs: int, seed: int | None = None, options: EnvOptions | None = None,
                  **kwargs) -> GymnasiumVectorEnvironment:
        """`num_envs` copies of the env as one batched PyEnvironment (options default to the settings')."""
        return GymnasiumVectorEnvironment(self.config.env_id, num_envs, seed=seed,
                                          options=options or self.env_options,
                                          call_timeout_s=self.config.env_call_timeout_s, **kwargs)

    def numpy_q_network(self) -> HostQNetwork | None:
        """The numpy mirror of the Q-network where it copies it exactly (plain MLPs), else None."""
        return HostQNetwork.mirror(self.agent.q_network, self.agent.policy_variables)

    def make_collect_policy(self, num_envs: int, seed: int, q_values: bool = False) -> CollectPolicy:
        """The actor's policy, chosen once: numpy for a plain MLP (unless `inference` says graph), else a graph call.

        `q_values`: the policy also returns the Q-values it acted on (actors that send TD-error priorities).
        Held random actions (`epsilon_hold_exponent`) wrap it; they share their state with `make_warmup_policy`.
        """
        config = self.config
        network = self.numpy_q_network() if config.inference == "auto" else None
        if network is not None:
            policy = NumpyCollectPolicy(network, self.agent.action_spec, seed + 1, config.epsilon_start,
                                        self.agent.valid_actions)
        else:
            policy = GraphCollectPolicy(self.agent, num_envs, config.epsilon_start, q_values=q_values)
        return self._with_holds(policy, num_envs, seed, config.epsilon_start, config.escape_greedy_loops)

    def make_warmup_policy(self, num_envs: int, seed: int) -> CollectPolicy:
        """Uniformly random valid actions for the warm-up (held, with the collect policy's holds, when they are on)."""
        policy = RandomCollectPolicy(self.action_spec, num_envs, seed, self.agent.valid_actions)
        return self._with_holds(policy, num_envs, seed, 1.0)

    def _with_holds(self, policy: CollectPolicy, num_envs: int, seed: int, epsilon: float,
                    escape_greedy_loops: bool = False) -> CollectPolicy:
        if not self.config.epsilon_hold_exponent:
            return policy
        return HeldRandomCollectPolicy(policy, self._holds(num_envs, seed), epsilon, self.agent.valid_actions,
                                       escape_greedy_loops)

    def _holds(self, num_envs: int, seed: int) -> HeldRandomActions:
        """The holds of (num_envs, seed), made once: the warm-up and the collect policy continue the same holds."""
        key = (num_envs, seed)
        if key not in self._hold_states:
            valid = self.agent.valid_actions
            self._hold_states[key] = HeldRandomActions(num_envs, valid.minimum, valid.minimum + valid.num_actions - 1,
                                                       self.config.epsilon_hold_exponent, seed=seed + 2,
                                                       action_shape=valid.action_shape)
        return self._hold_states[key]

    def make_evaluation_policy(self):
        """The greedy policy's Q-network for a loop that steps envs from Python, or TF-Agents' greedy policy.

        The numpy mirror (`HostQNetwork`) where it is exact; else a `GraphQNetwork` (one graph call per step) for
        feed-forward networks; a recurrent network's policy keeps its state in TF-Agents' policy.
        """
        if self.config.lstm_size:
            return self.agent.agent.policy
        return self.numpy_q_network() or GraphQNetwork(self.agent.q_network, self.agent.policy_variables,
                                                       self.agent.valid_actions.q_shape)

    def make_export_policy(self):
        """The greedy policy as it is exported: it returns the env's own actions (a multi-discrete env's form)."""
        return export_form(self.agent.agent.policy, self.action_form)
