"""Greedy evaluation episodes stepped inside the graph: a few graph calls per evaluation, not one per env step.

Why: on Python 3.11 + TF 2.15 every tensor handed to Python keeps a little memory for good
(tensorflow/tensorflow#62551). An evaluation of 10 CartPole episodes made ~500 policy calls from Python,
and the evaluator grew steadily over long runs. Here the envs are stepped through TF-Agents'
`TFPyEnvironment` (a `tf.numpy_function` per step, which passes numpy arrays, not Python tensors) and the
loop state lives in variables, so nothing crosses into Python per step. The loop runs `chunk_steps` steps
per call, so a stop request is still seen within one chunk.
"""

from __future__ import annotations

import tensorflow as tf
from tf_agents.environments import tf_py_environment

from dqn.envs import GymnasiumVectorEnvironment


class GreedyEpisodes:
    """One episode per env of `policy` (greedy), run `chunk_steps` env steps per graph call."""

    def __init__(self, policy, env: GymnasiumVectorEnvironment, chunk_steps: int = 100):
        self._policy = policy
        self._py_env = env
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
        self._start_graph = tf.function(self._start, autograph=False)
        self._advance_graph = tf.function(self._advance, autograph=False)
        self._averages_graph = tf.function(
            lambda: tf.stack([tf.reduce_mean(self._returns), tf.reduce_mean(self._lengths)]), autograph=False)

    def run(self, seed: int, stop_requested=lambda: False) -> tuple[float, float]:
        """(average return, average length) over one episode per env, the envs reset with `seed`.

        Stops early (returning the partial averages) once `stop_requested()` is true between chunks.
        """
        self._py_env.reseed(seed)
        self._start_graph()
        while not stop_requested() and bool(self._advance_graph()):
            pass
        average_return, average_length = self._averages_graph().numpy()
        return float(average_return), float(average_length)

    def _start(self) -> None:
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

    def close(self) -> None:
        """Closes the envs."""
        self._py_env.close()
