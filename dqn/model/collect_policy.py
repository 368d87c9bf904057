"""The actor's collect policy, chosen once: one object that turns a batch of time steps into actions.

Every kind answers `actions(time_step) -> (actions [N], Q-values [N, A] or None)`, takes new weights with
`set_weights` and its epsilon with `set_epsilon`, so the actor's step is one loop whatever runs the network:

- `NumpyCollectPolicy`: a plain MLP mirrored in numpy (dqn/model/numpy_policy.py); Q-values come for free.
- `GraphCollectPolicy`: TF-Agents' collect policy in one graph call per step (conv, RNN, anything the mirror
  declines); with `q_values` the same call also returns the Q-values (actors that send TD-error priorities).
- `RandomCollectPolicy`: uniform actions (the warm-up before the first weights).
- `HeldRandomActions`' wrapper `HeldRandomCollectPolicy`: random actions held for a while over a greedy inner
  policy (dqn/model/exploration.py), which then replaces the inner policy's epsilon; with `escape_greedy_loops` a
  greedy policy back in an observation it met since its last random action starts a hold (`GreedyLoops`).

Our own action choices (numpy greedy, warm-up and held random actions) go through `dqn.model.actions`, among the
valid actions of the observation's mask (`ValidActions`); in the graph policy TF-Agents chooses, with the mask from
DqnAgent's `observation_and_action_constraint_splitter` (dqn/model/agent.py), or the branching policies do
(dqn/model/branching.py).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.model.actions import ValidActions
from dqn.model.agent import AgentBundle
from dqn.model.exploration import HeldRandomActions
from dqn.model.flat_weights import FlatWeights
from dqn.model.graph_policy import batched_actions, batched_actions_and_q_values
from dqn.model.numpy_policy import HostEpsilonGreedy, HostQNetwork


class CollectPolicy(Protocol):
    """What the actor steps its envs with."""

    #: "numpy" or "graph": where the Q-network runs (for logs).
    runs_in: str

    def actions(self, time_step: ts.TimeStep) -> tuple[np.ndarray, np.ndarray | None]:
        """(actions [N], Q-values [N, actions] or None) for a batch of N time steps."""

    def set_weights(self, variables: list[np.ndarray]) -> None:
        """New policy weights (the policy's variable list, as published)."""

    def set_epsilon(self, epsilon: float) -> None:
        """The chance of a uniformly random action from now on."""


class NumpyCollectPolicy:
    """Epsilon-greedy over the numpy mirror of an MLP Q-network."""

    runs_in = "numpy"

    def __init__(self, network: HostQNetwork, action_spec, seed: int, epsilon: float,
                 valid: ValidActions | None = None):
        self._policy = HostEpsilonGreedy(network, action_spec, seed=seed, valid=valid)
        self._epsilon = epsilon

    def actions(self, time_step: ts.TimeStep) -> tuple[np.ndarray, np.ndarray]:
        """Actions and the Q-values they were chosen from."""
        return self._policy.actions_and_q_values(time_step.observation, self._epsilon)

    def set_weights(self, variables: list[np.ndarray]) -> None:
        """Swaps the numpy weights."""
        self._policy.network.set_weights(variables)

    def set_epsilon(self, epsilon: float) -> None:
        """Used from the next call on."""
        self._epsilon = epsilon


class GraphCollectPolicy:
    """TF-Agents' collect policy in one graph call per step; with `q_values`, the Q-values from the same call.

    TF-Agents' EpsilonGreedyPolicy over its QPolicy picks the actions (not `dqn.model.actions`).
    """

    runs_in = "graph"

    def __init__(self, bundle: AgentBundle, num_envs: int, epsilon: float, q_values: bool = False):
        self._epsilon_variable = bundle.epsilon
        self._epsilon = None
        self.set_epsilon(epsilon)
        self._weights = FlatWeights(bundle.policy_variables)
        if q_values:
            self._act = batched_actions_and_q_values(bundle.agent.collect_policy, bundle.q_network,
                                                     bundle.valid_actions)
        else:
            act = batched_actions(bundle.agent.collect_policy, num_envs)
            self._act = lambda time_step: (act(time_step), None)

    def actions(self, time_step: ts.TimeStep) -> tuple[np.ndarray, np.ndarray | None]:
        """Actions (and Q-values when asked for at construction)."""
        return self._act(time_step)

    def set_weights(self, variables: list[np.ndarray]) -> None:
        """Assigns the weights to the policy's variables in one graph call."""
        self._weights.assign(variables)

    def set_epsilon(self, epsilon: float) -> None:
        """Assigns the collect policy's epsilon variable, only when it changed (each eager assign keeps memory)."""
        if epsilon != self._epsilon:
            self._epsilon_variable.assign(epsilon)
            self._epsilon = epsilon


class RandomCollectPolicy:
    """Uniformly random valid actions: the actor's warm-up."""

    runs_in = "numpy"

    def __init__(self, action_spec, num_envs: int, seed: int, valid: ValidActions | None = None):
        self._valid = valid or ValidActions.of(None, action_spec)
        self._num_envs = num_envs
        self._rng = np.random.default_rng(seed)

    def actions(self, time_step: ts.TimeStep) -> tuple[np.ndarray, None]:
        """One uniform valid action per env; no Q-values."""
        mask = None if time_step is None else self._valid.mask(time_step.observation)
        return self._valid.random(self._rng, self._num_envs, mask), None

    def set_weights(self, variables: list[np.ndarray]) -> None:
        """No weights."""

    def set_epsilon(self, epsilon: float) -> None:
        """Always random."""


class GreedyLoops:
    """Finds the envs whose greedy policy has brought them back to an observation met since their last random action.

    In a deterministic env a deterministic greedy policy that returns to an observation goes round the same loop for
    ever (while the weights hold): a move into a wall repeated, or two states visited in turn. Its values then sink
    towards the loop's, and the data that would lift them stops coming. Per env, the observations (every part, bit
    for bit, as a hash) met since the episode's start or the env's last random action are kept; a random action
    ends the chain of greedy steps, so it forgets them.
    """

    def __init__(self, num_envs: int):
        self._met: list[set[int]] = [set() for _ in range(num_envs)]

    def find(self, time_step: ts.TimeStep) -> np.ndarray:
        """[N] bool: the env's observation was met before in this chain; every observation is then remembered."""
        self.forget(np.asarray(time_step.step_type) == ts.StepType.FIRST)
        count = len(self._met)
        parts = [np.ascontiguousarray(part).reshape(count, -1) for part in tf.nest.flatten(time_step.observation)]
        loops = np.zeros(count, bool)
        for env, met in enumerate(self._met):
            key = hash(b"".join(part[env].tobytes() for part in parts))
            loops[env] = key in met
            met.add(key)
        return loops

    def forget(self, envs: np.ndarray) -> None:
        """The marked envs' chains of greedy steps start afresh (a random action, or a new episode)."""
        for env in np.flatnonzero(envs):
            self._met[env].clear()


class HeldRandomCollectPolicy:
    """Held random actions over a greedy `inner` policy: the holds take the epsilon, the inner policy plays 0.

    With `escape_greedy_loops`, a hold also starts where the greedy policy has come back to an observation
    (`GreedyLoops`).
    """

    def __init__(self, inner: CollectPolicy, holds: HeldRandomActions, epsilon: float,
                 valid: ValidActions | None = None, escape_greedy_loops: bool = False):
        self._inner = inner
        self._holds = holds
        self._epsilon = epsilon
        self._valid = valid
        self._loops = GreedyLoops(holds.num_envs) if escape_greedy_loops else None
        self.runs_in = inner.runs_in
        inner.set_epsilon(0.0)

    def actions(self, time_step: ts.TimeStep) -> tuple[np.ndarray, np.ndarray | None]:
        """The inner policy's greedy actions, replaced where a hold runs or starts (among the valid actions)."""
        greedy, q_values = self._inner.actions(time_step)
        starts = time_step.step_type == ts.StepType.FIRST
        mask = None if self._valid is None else self._valid.mask(time_step.observation)
        loops = None if self._loops is None else self._loops.find(time_step)
        actions = self._holds.actions(greedy, self._epsilon, episode_starts=starts, mask=mask, force_starts=loops)
        if self._loops is not None:
            self._loops.forget(self._holds.holding)
        return actions, q_values

    def set_weights(self, variables: list[np.ndarray]) -> None:
        """The inner policy's weights."""
        self._inner.set_weights(variables)

    def set_epsilon(self, epsilon: float) -> None:
        """The share of random steps the holds keep."""
        self._epsilon = epsilon
