"""How fast this machine trains the run's own agent: the learner's side of the auto replay ratio.

Measured where the run is resolved, with the run's network, batch and n-step window, on a batch of zeros (the
values do not change the cost of a dense or conv step), so the ratio follows the machine it runs on instead of a
figure from another one.
"""

from __future__ import annotations

import time

import tensorflow as tf

from dqn.model.agent import build_agent

#: Timed SGD calls after the one that traces the graph: enough for a stable figure, few enough to stay within seconds.
TIMED_CALLS = 5


def seconds_per_sample(config, observation_spec, action_spec, batch_size: int, sequence_length: int) -> float:
    """Wall seconds one SGD step of the run's agent spends per sampled transition (or sequence) on this machine."""
    bundle = build_agent(config, observation_spec, action_spec)
    batch = tf.nest.map_structure(lambda spec: tf.zeros((batch_size, sequence_length, *spec.shape), spec.dtype),
                                  bundle.agent.collect_data_spec)
    train = tf.function(bundle.agent.train)
    train(batch)  # traces the graph: start-up, not the step's cost
    started = time.perf_counter()
    for _ in range(TIMED_CALLS):
        train(batch)
    return (time.perf_counter() - started) / TIMED_CALLS / batch_size
