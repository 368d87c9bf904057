"""Evaluation episodes, one per env, without a Python-to-TF call per env step.

The policy is greedy, or epsilon-greedy with the evaluator's `eval_epsilon` (Atari's protocol: see
evaluator/evaluate.py). A run plays one episode per env, feeds the evaluation metrics (evaluator/metrics.py) and
returns their values. Each episode's final info reaches the metrics too: the vector env keeps it at the step
that ends the episode (`GymnasiumVectorEnvironment.keep_final_infos`), so both loops get it without a Python call
of their own per step. An episode that an env fault cut short (dqn/envs/faults.py: the env raised and was
recreated) is left out of every metric, and `cut_short` says how many were.

Why no tensor per step: a policy call per env step that handed tensors to Python would keep their memory for good
(dqn/model/graph_io.py), growing the evaluator with every episode. Two loops avoid it:
- `PythonLoopEpisodes` (feed-forward Q-networks): the envs are stepped from Python on the main thread, so every
  env call has its deadline (dqn/envs/call_timer.py). A plain MLP runs in numpy (dqn/model/numpy_policy.py, the
  actors' mirror), with no tensor at all and less CPU per step than a graph call; other networks run one graph call
  per step through host buffers (`GraphQNetwork`, dqn/model/graph_policy.py). Metrics are fed at every step
  (`on_step`) and per episode (`on_episodes`).
- `InGraphLoopEpisodes` (recurrent Q-networks, whose policy state lives in TF-Agents' policy): the envs are
  stepped through TF-Agents' `TFPyEnvironment` (a `tf.numpy_function` per step, which passes numpy arrays, not
  Python tensors) and the loop state lives in variables, so nothing crosses into Python per step. The loop runs
  `chunk_steps` steps per call, so a stop request is still seen within one chunk. Its env calls run on a
  TensorFlow thread, without the call deadline. Metrics are fed per episode only (`on_episodes`), from the
  per-env totals that are read once all the episodes have ended.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tf_agents.environments import tf_py_environment
from tf_agents.policies import epsilon_greedy_policy
from tf_agents.trajectories import time_step as ts

from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.model.actions import ValidActions
from dqn.model.flat_weights import FlatWeights
from dqn.model.graph_policy import GraphQNetwork
from dqn.model.numpy_policy import HostEpsilonGreedy, HostQNetwork
from evaluator.metrics import EpisodeTotals, EvalMetric, MetricContext, make_metrics

#: Keeps random play's env seeds and action draws apart from the evaluations' and the envs' own generators.
RANDOM_PLAY_STREAM = 0x5EED


def cut_short_by_faults(lengths: np.ndarray, first_step_fault: np.ndarray) -> np.ndarray:
    """Which envs' first episode an env fault ended. A faulted step ends its episode, so the fault's step is the length.

    A first fault after the episode had ended leaves it whole; -1 (no fault) never equals a length.
    """
    return first_step_fault == lengths


def make_episode_runner(policy, action_spec, env: GymnasiumVectorEnvironment, epsilon: float = 0.0,
                        metrics: list[EvalMetric] | None = None, valid: ValidActions | None = None
                        ) -> PolicyEpisodes:
    """The Python loop for a Q-network with `q_values` (numpy or one graph call), else the in-graph loop of a policy.

    `policy` is `DqnBuilder.make_evaluation_policy()`. With `epsilon` > 0, each step takes a uniformly random
    action with that probability (0 = greedy). `metrics` defaults to every registered one (`EVAL_METRICS`), built
    with a context of the env alone (no target return); the evaluator passes its own (`make_episodes`). `valid`:
    the run's `ValidActions` (the agent's), where its observations hold a mask of valid actions.
    """
    valid = valid or ValidActions.of(env.observation_spec(), action_spec)
    if isinstance(policy, (HostQNetwork, GraphQNetwork)):
        return PythonLoopEpisodes(policy, action_spec, env, epsilon=epsilon, metrics=metrics, valid=valid)
    return InGraphLoopEpisodes(policy, env, epsilon=epsilon, metrics=metrics, valid=valid)


class PolicyEpisodes:
    """What both loops share: the envs, the metrics, and turning each env's totals into metric values.

    `load(variables)` sets the weights. `run(seed, stop_requested)` plays one episode per env, reset with `seed`,
    and returns {metric name: value}; `run_random` plays them with uniformly random valid actions instead. After a
    run, `cut_short` and `whole_episodes` count its episodes; `illegal_actions` counts, over every run, the actions
    the observation's mask forbade (0 is the only right value).
    """

    def __init__(self, env: GymnasiumVectorEnvironment, metrics: list[EvalMetric] | None, valid: ValidActions):
        self._env = env
        self._valid = valid
        self.illegal_actions = 0
        env.keep_final_infos()
        self.metrics = make_metrics(MetricContext(env.env_id, env.action_spec())) if metrics is None \
            else list(metrics)
        self.cut_short = 0  # episodes of the last run left out: an env fault ended them
        self.whole_episodes = 0  # episodes of the last run that the metrics counted
        self.whole_returns = np.zeros(0)  # their returns

    def _start(self, seed: int) -> None:
        """Reseeds the envs and resets the metrics for a new run."""
        self._env.reseed(seed)
        for metric in self.metrics:
            metric.reset(self._env.batch_size)

    def _finish(self, returns: np.ndarray, lengths: np.ndarray) -> dict[str, float]:
        """Feeds each env's episode to the metrics, leaving out episodes that a fault cut short, and reads them.

        A metric whose result is None (nothing to report this time) is left out of the values.
        """
        cut_short = cut_short_by_faults(lengths, self._env.first_step_fault)
        infos = tuple({} if info is None else info for info in self._env.final_infos)
        episodes = EpisodeTotals(returns, lengths, ~cut_short, infos)
        self.cut_short, self.whole_episodes = int(cut_short.sum()), episodes.count
        self.whole_returns = np.asarray(returns, np.float64)[~cut_short]
        for metric in self.metrics:
            metric.on_episodes(episodes)
        values = {metric.name: metric.result() for metric in self.metrics}
        return {name: value for name, value in values.items() if value is not None}

    def run_random(self, seed: int, stop_requested=lambda: False) -> dict[str, float]:
        """The metrics' values of uniformly random valid actions, one episode per env reset with `seed`.

        The score a learned policy has to beat on the same env; played on these envs, stepped from Python.
        """
        rng = np.random.default_rng([RANDOM_PLAY_STREAM, seed])
        return self._play(seed, lambda observation, mask: self._valid.random(rng, self._env.batch_size, mask),
                          stop_requested)

    def _play(self, seed: int, choose, stop_requested) -> dict[str, float]:
        """One episode per env with `choose(observation, mask)`'s actions, stepped from Python; the metrics' values.

        Stops early (the values then cover the partial episodes) once `stop_requested()` is true between steps.
        """
        self._start(seed)
        valid = self._valid
        time_step = self._env.reset()
        returns = np.zeros(self._env.batch_size)
        lengths = np.zeros(self._env.batch_size)
        running = np.ones(self._env.batch_size, dtype=bool)
        step_metrics = [metric for metric in self.metrics if metric.needs_steps()]
        while running.any() and not stop_requested():
            mask = valid.mask(time_step.observation)
            actions = choose(time_step.observation, mask)
            self.illegal_actions += valid.illegal(actions, mask)
            time_step = self._env.step(actions)
            for metric in step_metrics:
                metric.on_step(time_step.reward, time_step.step_type, running)
            # Finished envs keep stepping (the vector env restarts them); only running episodes count.
            returns += np.where(running, time_step.reward, 0.0)
            lengths += running
            running &= time_step.step_type != ts.StepType.LAST
        return self._finish(returns, lengths)

    def close(self) -> None:
        """Closes the envs."""
        self._env.close()


class PythonLoopEpisodes(PolicyEpisodes):
    """One episode per env, stepped from Python; `load` sets the network's weights (the policy's variable order)."""

    def __init__(self, network: HostQNetwork | GraphQNetwork, action_spec, env: GymnasiumVectorEnvironment,
                 epsilon: float = 0.0, metrics: list[EvalMetric] | None = None, valid: ValidActions | None = None):
        super().__init__(env, metrics, valid or ValidActions.of(env.observation_spec(), action_spec))
        self._network = network
        self._action_spec = action_spec
        self._runs_in = "numpy (plain MLP)" if isinstance(network, HostQNetwork) else "one graph call per step"
        self._epsilon = epsilon

    def describe(self) -> str:
        """How the episodes run, for the log."""
        return f"stepped from Python, the Q-network in {self._runs_in}"

    def load(self, variables: list[np.ndarray]) -> None:
        """Evaluate these weights from now on."""
        self._network.set_weights(variables)

    def run(self, seed: int, stop_requested=lambda: False) -> dict[str, float]:
        """The metrics' values over one episode per env, the envs reset with `seed` (early stop: `_play`)."""
        # The random actions are drawn from `seed` too, so every evaluation plays the same episodes for the same
        # weights.
        policy = HostEpsilonGreedy(self._network, self._action_spec, seed=seed, valid=self._valid)
        return self._play(seed, lambda observation, mask: policy.actions(observation, self._epsilon, mask),
                          stop_requested)


class InGraphLoopEpisodes(PolicyEpisodes):
    """One episode per env of a TF-Agents policy (greedy, or epsilon-greedy), `chunk_steps` env steps per graph call.

    Only per-episode metrics (`on_episodes`) can be fed. A metric that needs every step is refused.
    """

    def __init__(self, policy, env: GymnasiumVectorEnvironment, chunk_steps: int = 100, epsilon: float = 0.0,
                 metrics: list[EvalMetric] | None = None, valid: ValidActions | None = None):
        super().__init__(env, metrics, valid or ValidActions.of(env.observation_spec(), env.action_spec()))
        per_step = [metric.name for metric in self.metrics if metric.needs_steps()]
        if per_step:
            raise ValueError(f"evaluation metrics {per_step} need every env step, which the in-graph loop keeps "
                             "inside TF: compute them in on_episodes from the per-env totals")
        self._weights = FlatWeights(list(policy.variables()))
        # TF-Agents' wrapper draws its random actions from TF's random ops (not reseeded per evaluation).
        self._policy = epsilon_greedy_policy.EpsilonGreedyPolicy(policy, epsilon) if epsilon > 0 else policy
        self._tf_env = tf_py_environment.TFPyEnvironment(env)
        self._chunk_steps = chunk_steps
        num_envs = env.batch_size

        def variable(initial):
            return tf.Variable(initial, trainable=False)

        self._time_step = tf.nest.map_structure(
            lambda spec: variable(tf.zeros([num_envs, *spec.shape], spec.dtype)), self._tf_env.time_step_spec())
        self._initial_state = policy.get_initial_state(num_envs)
        self._policy_state = tf.nest.map_structure(variable, self._initial_state)
        self._returns = variable(tf.zeros([num_envs], tf.float32))
        self._lengths = variable(tf.zeros([num_envs], tf.float32))
        self._running = variable(tf.zeros([num_envs], tf.bool))
        self._illegal = variable(tf.zeros([], tf.int64))  # actions the mask forbade, over every run
        self._start_graph = tf.function(self._start_episodes, autograph=False)
        self._advance_graph = tf.function(self._advance, autograph=False)
        self._totals_graph = tf.function(lambda: tf.stack([self._returns, self._lengths]), autograph=False)

    def describe(self) -> str:
        """How the episodes run, for the log."""
        return "inside the graph (recurrent policy)"

    def load(self, variables: list[np.ndarray]) -> None:
        """Evaluate these weights from now on (assigned to the policy's variables in one graph call)."""
        self._weights.assign(variables)

    def run(self, seed: int, stop_requested=lambda: False) -> dict[str, float]:
        """The metrics' values over one episode per env, the envs reset with `seed`.

        Stops early (the values then cover the partial episodes) once `stop_requested()` is true between chunks.
        """
        self._start(seed)
        self._start_graph()
        while not stop_requested() and bool(self._advance_graph()):
            pass
        returns, lengths = self._totals_graph().numpy()
        self.illegal_actions = int(self._illegal.numpy())
        return self._finish(returns, lengths)

    def _start_episodes(self) -> None:
        time_step = self._tf_env.reset()
        tf.nest.map_structure(lambda var, value: var.assign(value), self._time_step, time_step)
        tf.nest.map_structure(lambda var, value: var.assign(value), self._policy_state, self._initial_state)
        self._returns.assign(tf.zeros_like(self._returns))
        self._lengths.assign(tf.zeros_like(self._lengths))
        self._running.assign(tf.ones_like(self._running))

    def _advance(self) -> tf.Tensor:
        """Up to chunk_steps steps; True while some episode is still running."""
        def running_chunk(index, time_step, policy_state, returns, lengths, running):
            return tf.logical_and(index < self._chunk_steps, tf.reduce_any(running))

        def one_step(index, time_step, policy_state, returns, lengths, running):
            action_step = self._policy.action(time_step, policy_state)
            self._count_illegal(time_step.observation, action_step.action)
            next_time_step = self._tf_env.step(action_step.action)
            # Finished envs keep stepping (the vector env restarts them); only running episodes count.
            returns += tf.where(running, next_time_step.reward, 0.0)
            lengths += tf.cast(running, tf.float32)
            running = tf.logical_and(running, tf.logical_not(next_time_step.is_last()))
            return index + 1, next_time_step, action_step.state, returns, lengths, running

        read = lambda var: var.read_value()  # noqa: E731 - a one-line reader for tf.nest
        _, time_step, policy_state, returns, lengths, running = tf.while_loop(
            running_chunk, one_step,
            (tf.constant(0), tf.nest.map_structure(read, self._time_step),
             tf.nest.map_structure(read, self._policy_state), self._returns.read_value(),
             self._lengths.read_value(), self._running.read_value()))
        tf.nest.map_structure(lambda var, value: var.assign(value), self._time_step, time_step)
        tf.nest.map_structure(lambda var, value: var.assign(value), self._policy_state, policy_state)
        self._returns.assign(returns)
        self._lengths.assign(lengths)
        self._running.assign(running)
        return tf.reduce_any(running)

    def _count_illegal(self, observation, actions) -> None:
        """Adds the actions the observation's mask forbids to the count (scalar actions: no RNN branches)."""
        mask = self._valid.mask_tf(observation)
        if mask is None:
            return
        allowed = tf.gather(mask, tf.cast(actions, tf.int32) - self._valid.minimum, axis=-1, batch_dims=1)
        self._illegal.assign_add(tf.reduce_sum(tf.cast(tf.logical_not(allowed), tf.int64)))
