"""The learner's input: sampled replay items as a tf.data.Dataset (`DqnBuilder.make_dataset`).

The book's input is `ReverbReplayBuffer(...).as_dataset(sample_batch_size=64, num_steps=2, num_parallel_calls=3)
.prefetch(3)`; it stays selectable (`--replay-dataset as_dataset`). The default reads Reverb streams that batch in
C++, with less learner CPU per item (no tf.data map or interleave step per item). Either way a dataset element is
(experience, info) of whole items as Reverb returns them; the replay layout's `finish_batch` turns one into the rows
`agent.train` takes.
"""

from __future__ import annotations

import reverb
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer

from dqn.replay_layout.items import REPLAY_TABLE
from dqn.replay_layout.layout import ReplayLayout
from dqn.settings.config import LearnerSettings


def sample_dataset(config: LearnerSettings, layout: ReplayLayout, item_step_spec) -> tf.data.Dataset:
    """The sampled items as Reverb returns them, prefetched; the iterator ends after no_data_timeout_s without one.

    The learner's feed applies the layout's `finish_batch` inside its staging call rather than as a tf.data map:
    a map step costs learner CPU per batch on top of the same ops.
    """
    if config.replay_dataset == "as_dataset":
        dataset = _book_dataset(config, layout, item_step_spec)
    else:
        dataset = _reverb_streams(config, layout, item_step_spec)
    return dataset.prefetch(config.prefetch)


def items_per_batch(config: LearnerSettings, layout: ReplayLayout) -> int:
    """Items sampled for one train call: batch_size * train_steps_per_call transitions as whole items."""
    return config.train_batch_size() * config.train_steps_per_call // layout.transitions_per_item


def _book_dataset(config: LearnerSettings, layout: ReplayLayout, item_step_spec) -> tf.data.Dataset:
    """The book's `ReverbReplayBuffer.as_dataset`: one Reverb stream per batch slot (up to 32), an op per item."""
    length = layout.sequence_length
    buffer = reverb_replay_buffer.ReverbReplayBuffer(
        item_step_spec, REPLAY_TABLE, sequence_length=length,
        server_address=config.replay_address, rate_limiter_timeout_ms=int(config.no_data_timeout_s * 1000))
    dataset = buffer.as_dataset(sample_batch_size=items_per_batch(config, layout), num_steps=length,
                                num_parallel_calls=config.parallel_calls())
    # TF-Agents repeats each item's info along its steps; one value per item is what the learner uses.
    return dataset.map(lambda experience, info: (experience, tf.nest.map_structure(lambda t: t[:, 0], info)))


def _reverb_streams(config: LearnerSettings, layout: ReplayLayout, item_step_spec) -> tf.data.Dataset:
    """`parallel_calls()` Reverb TrajectoryDatasets, each batching its share of the batch in C++.

    Per item this costs no tf.data map or interleave step, unlike `as_dataset`.
    """
    length = layout.sequence_length
    spec = item_step_spec
    shapes = tf.nest.map_structure(lambda s: tf.TensorShape([length]).concatenate(s.shape), spec)
    dtypes = tf.nest.map_structure(lambda s: s.dtype, spec)
    total = items_per_batch(config, layout)
    streams = config.parallel_calls()
    share = total // streams

    def stream(_) -> tf.data.Dataset:
        return reverb.TrajectoryDataset(
            config.replay_address, REPLAY_TABLE, dtypes, shapes, max_in_flight_samples_per_worker=2 * share,
            num_workers_per_iterator=1, rate_limiter_timeout_ms=int(config.no_data_timeout_s * 1000),
        ).batch(share, drop_remainder=True)

    if streams == 1:
        return stream(0).map(lambda sample: (sample.data, sample.info))
    dataset = tf.data.Dataset.range(streams).interleave(stream, cycle_length=streams, num_parallel_calls=streams,
                                                        deterministic=False)

    def merge(sample):  # [streams, share, ...] -> [total, ...] items
        flat = tf.nest.map_structure(lambda t: tf.reshape(t, [total, *t.shape[2:]]), sample)
        return flat.data, flat.info

    return dataset.batch(streams, drop_remainder=True).map(merge)
