"""Graph calls on the learner's staged batches (learner/staged_batches.py): the train step, the batch's summaries.

Each reads a slot's variables in-graph and returns nothing to Python, so no tensor crosses per SGD step or per
summary: such a tensor would keep its memory for good (dqn/model/graph_io.py).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.model.actions import max_q_values_tf
from dqn.model.agent import AgentBundle, illegal_target_actions_tf
from dqn.model.graph_io import HostInput, HostOutput


class StagedTrainer:
    """The train step on a staged slot, read in-graph; the last loss stays in a variable (learner/staged_batches.py).

    Prioritized replay moves its per-step arrays (sample info out, importance weights in, TD errors out) through
    `dqn.model.graph_io` buffers, so even that path hands no tensor to Python.
    """

    def __init__(self, train_fn, slots: list):
        self.loss = tf.Variable(0.0, trainable=False, name="last_loss")
        experience, info = slots[0]
        rows = tf.nest.flatten(experience)[0].shape[0]  # transitions per call (batch x steps per call)
        self._weights = HostInput([rows], tf.float32)
        self._td_errors = HostOutput([rows], tf.float32)
        self._info = tf.nest.map_structure(lambda variable: HostOutput(variable.shape, variable.dtype), info)
        self._plain = [self._graph(train_fn, slot, weighted=False) for slot in slots]
        self._weighted = [self._graph(train_fn, slot, weighted=True) for slot in slots]
        self._read_info = [self._info_graph(slot) for slot in slots]

    def _graph(self, train_fn, slot, weighted: bool):
        def read_experience():
            return tf.nest.map_structure(lambda variable: variable.read_value(), slot[0])

        if not weighted:
            @tf.function(autograph=False)
            def train():
                loss, _ = train_fn(read_experience(), None)
                self.loss.assign(loss)

            return train

        @tf.function(autograph=False)
        def train_weighted():
            loss, td_errors = train_fn(read_experience(), self._weights.read())
            self.loss.assign(loss)
            self._td_errors.write(td_errors)

        return train_weighted

    def _info_graph(self, slot):
        @tf.function(autograph=False)
        def read_info():
            tf.nest.map_structure(lambda output, variable: output.write(variable.read_value()), self._info, slot[1])

        return read_info

    def train(self, index: int) -> None:
        """SGD step(s) on slot `index`; returns nothing, so no tensor reaches Python."""
        self._plain[index]()

    def sample_info(self, index: int):
        """Slot `index`'s Reverb sample info (key, probability, table_size, ...) as numpy arrays, one per item."""
        self._read_info[index]()
        return tf.nest.map_structure(lambda output: output.value.copy(), self._info)

    def train_weighted(self, index: int, weights: np.ndarray) -> np.ndarray:
        """SGD step(s) on slot `index` with importance weights; returns the TD errors (prioritized replay)."""
        self._weights.set(weights)
        self._weighted[index]()
        return self._td_errors.value.copy()


class BatchStats:
    """The last loss, the mean max-Q and the target's invalid actions of a staged batch, per slot, in one graph call.

    The values come back through a `dqn.model.graph_io.HostOutput`, not as returned tensors (see the module docstring).
    With a mask of valid actions the max is over the valid ones, and the actions the TD target bootstraps from at
    the batch's last observations are checked against their stored masks.
    """

    def __init__(self, bundle: AgentBundle, batch_size: int, slots: list, loss: tf.Variable):
        self._output = HostOutput([3], tf.float32)
        network = bundle.q_network  # the agent's own Q-network (the bundle keeps it public)
        valid = bundle.valid_actions
        # Only where some action can be forbidden; a recurrent target's action needs its state, not kept here.
        checks = (valid.masked or valid.padding is not None) and not network.state_spec

        def graph(experience):
            @tf.function(autograph=False)
            def measure():
                def rows(part, step):
                    return tf.nest.map_structure(lambda v: v.read_value()[:batch_size, step], part)

                observation = rows(experience.observation, 0)
                step_type = experience.step_type.read_value()[:batch_size, 0]
                state = network.get_initial_state(batch_size) if network.state_spec else ()
                q_values, _ = network(valid.network_observation(observation), step_type=step_type,
                                      network_state=state, training=False)
                mean_q = tf.reduce_mean(max_q_values_tf(q_values, valid.mask_tf(observation)))
                illegal = tf.constant(0, tf.int32)
                if checks:
                    last = ts.TimeStep(rows(experience.step_type, -1), rows(experience.reward, -1),
                                       rows(experience.discount, -1), rows(experience.observation, -1))
                    illegal = illegal_target_actions_tf(bundle, last)
                self._output.write(tf.stack([loss.read_value(), mean_q, tf.cast(illegal, tf.float32)]))

            return measure

        self._graphs = [graph(slot[0]) for slot in slots]

    def measure(self, index: int) -> tuple[float, float, int]:
        """(last loss, mean over the first batch rows of max_a Q(s_0, a), invalid target actions) on slot `index`."""
        self._graphs[index]()
        loss, mean_q, illegal = self._output.value
        return float(loss), float(mean_q), int(illegal)
