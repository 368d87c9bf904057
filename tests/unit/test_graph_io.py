"""Values moved through dqn.model.graph_io buffers: graph calls see each new input and publish each new result."""

import numpy as np
import pytest
import tensorflow as tf

from dqn.model.flat_weights import FlatWeights
from dqn.model.graph_io import HostInput, HostOutput
from dqn.process.summaries import GraphScalars
from dqn.resolve import resolved_builder
from dqn.settings.config import LearnerConfig
from learner.staged_trainer import BatchStats, StagedTrainer
from tests.events import read_scalars


def test_host_buffers_carry_new_values_into_and_out_of_every_call():
    incoming, outgoing = HostInput([3], tf.int64), HostOutput([3], tf.int64)
    keys = HostOutput([2], tf.uint64)

    @tf.function(autograph=False)
    def double():
        outgoing.write(incoming.read() * 2)
        keys.write(tf.constant([2**63 + 1, 7], tf.uint64))

    for values in ([1, 2, 3], [-4, 5, 2**40]):  # a traced constant or a pruned op would repeat the first result
        incoming.set(values)
        double()
        np.testing.assert_array_equal(outgoing.value, np.array(values) * 2)
    np.testing.assert_array_equal(keys.value, np.array([2**63 + 1, 7], np.uint64))
    with pytest.raises(ValueError):
        incoming.set([1, 2])  # wrong shape: refused on the Python side, before any graph call


def test_graph_scalars_write_each_step_and_value_exactly(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    scalars = GraphScalars(writer)
    scalars.write(5, {"b": 2.5, "a": -1.0})
    scalars.write(2**40 + 1, {"b": 3.25, "a": 0.5})  # beyond float32's exact integers
    scalars.write(7, {"c": 9.0})  # another set of names gets its own graph
    writer.flush()
    assert read_scalars(tmp_path) == {"a": [(5, -1.0), (2**40 + 1, 0.5)], "b": [(5, 2.5), (2**40 + 1, 3.25)],
                                      "c": [(7, 9.0)]}


def test_flat_weights_reads_are_independent_copies():
    variables = [tf.Variable(np.zeros([2, 3], np.float32)), tf.Variable(np.zeros([4], np.float32))]
    flat = FlatWeights(variables)
    flat.assign([np.ones([2, 3]), np.full([4], 2.0)])
    first = flat.read()
    flat.assign([np.full([2, 3], 5.0), np.zeros([4])])
    second = flat.read()
    np.testing.assert_array_equal(first[0], np.ones([2, 3]))  # an earlier read (queued for publishing) is kept
    np.testing.assert_array_equal(second[0], np.full([2, 3], 5.0))


def test_batch_stats_equal_the_eager_loss_and_mean_max_q():
    tf.random.set_seed(1)
    bundle = resolved_builder(LearnerConfig(fc_layer_params=(8,))).agent
    rng = np.random.default_rng(0)
    batch = 4
    slots = [(type("Experience", (), {})(), None) for _ in range(2)]
    for experience, _ in slots:
        experience.observation = tf.Variable(rng.normal(size=[batch + 2, 2, 4]).astype(np.float32))
        experience.step_type = tf.Variable(np.ones([batch + 2, 2], np.int32))
    loss = tf.Variable(0.75)
    stats = BatchStats(bundle, batch, slots, loss)
    network = bundle.agent._q_network
    for index, (experience, _) in enumerate(slots):
        q_values, _ = network(experience.observation[:batch, 0], step_type=experience.step_type[:batch, 0])
        got_loss, got_mean_q, illegal = stats.measure(index)
        assert got_loss == pytest.approx(0.75) and illegal == 0  # CartPole: no action is ever forbidden
        assert got_mean_q == pytest.approx(float(tf.reduce_mean(tf.reduce_max(q_values, axis=-1))), rel=1e-5)


def test_staged_trainer_weighted_path_returns_this_calls_td_errors():
    slot = ({"x": tf.Variable(np.arange(6, dtype=np.float32))},
            {"key": tf.Variable(np.array([3, 9], np.uint64)), "probability": tf.Variable([0.25, 0.5])})

    def train_fn(experience, weights):  # stands in for the agent: a loss and one "TD error" per row
        td_errors = experience["x"] * (1.0 if weights is None else weights)
        return tf.reduce_sum(td_errors), td_errors

    trainer = StagedTrainer(train_fn, [slot])
    info = trainer.sample_info(0)
    np.testing.assert_array_equal(info["key"], [3, 9])
    np.testing.assert_allclose(info["probability"], [0.25, 0.5])
    first = trainer.train_weighted(0, np.full(6, 2.0, np.float32))
    second = trainer.train_weighted(0, np.full(6, 0.5, np.float32))
    np.testing.assert_allclose(first, np.arange(6) * 2.0)
    np.testing.assert_allclose(second, np.arange(6) * 0.5)
    assert float(trainer.loss.numpy()) == pytest.approx(15 * 0.5)
