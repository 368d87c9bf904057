"""The learner process: Reverb samples -> DqnAgent.train, plus publishing and checkpoints.

The book's input is `ReverbReplayBuffer(...).as_dataset(sample_batch_size=64, num_steps=2, num_parallel_calls=3)
.prefetch(3)`; it stays selectable (`--replay-dataset as_dataset`). The default reads Reverb streams that batch in
C++, ~3x less learner CPU per item, and items that each hold a block of envs (actor/block_writer.py), unblocked
into the same [batch, 2, ...] rows; batches reach the train step through variables (learner/feed.py).
Weights + train step go to the `variables` table at start and every `publish_interval` steps;
checkpoints every `checkpoint_interval` steps and on SIGTERM (restored on start).
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import reverb
import tensorflow as tf
from tf_agents.policies import policy_saver
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.utils import common

from dqn.agent import AgentBundle, build_agent, epsilon_at
from dqn.config import LearnerConfig
from dqn.export import export_policy
from dqn.health import start_health
from dqn.nstep import close_episode_ends
from dqn.progress import write_progress
from dqn.replay import REPLAY_TABLE, check_table_matches, wait_for_server
from dqn.runtime import StopSignal, release_free_heap
from dqn.summaries import GraphScalars
from dqn.weights import FlatWeights, WeightsPublisher
from learner.checkpoints import LearnerCheckpoints, guarded
from learner.feed import StagedBatches
from learner.priorities import PriorityUpdater, importance_beta, importance_weights, item_td_errors
from learner.staged import BatchStats, StagedTrainer
from learner.stats import ReplayRates

log = logging.getLogger("learner")


def make_dataset(config: LearnerConfig, bundle: AgentBundle) -> tf.data.Dataset:
    """Batches of [batch_size * train_steps_per_call, n + 1, ...] with their sample info (one value per item).

    With block items the info has one value per block of envs_per_item consecutive rows.
    The iterator ends (not hangs) after no_data_timeout_s without a sample.
    """
    return sample_dataset(config, bundle).map(finish_batch(config, bundle))


def sample_dataset(config: LearnerConfig, bundle: AgentBundle) -> tf.data.Dataset:
    """The sampled items as Reverb returns them, prefetched: `finish_batch` turns one into what the agent trains on.

    The learner's feed applies `finish_batch` inside its staging call rather than as a tf.data map: a map step
    costs ~0.15 ms of learner CPU per batch on top of the same ops (bench/learner_throughput.py).
    """
    if config.replay_dataset == "as_dataset":
        dataset = _book_dataset(config, bundle)
    else:
        dataset = _reverb_streams(config, bundle)
    return dataset.prefetch(config.prefetch)


def finish_batch(config: LearnerConfig, bundle: AgentBundle):
    """A graph function (experience, info) -> (experience, info) of [batch, n + 1, ...] rows for `agent.train`."""
    def finish(experience, info):
        if config.actors_send_priorities():
            # The actor's initial priority already did its work on the server; the agent's specs have no policy_info.
            experience = experience._replace(policy_info=())
        if bundle.envs_per_item > 1:
            experience = tf.nest.map_structure(unblock, experience)
        if config.items_run_past_episode_end():
            experience = close_episode_ends(experience, config.gamma)
        return experience, info

    return finish


def unblock(leaf: tf.Tensor) -> tf.Tensor:
    """Block items [k, L, E, ...] -> [k * E, L, ...]: env e of item i becomes row i * E + e."""
    moved = tf.transpose(leaf, [0, 2, 1, *range(3, leaf.shape.rank)])
    return tf.reshape(moved, [-1, *moved.shape[2:]])


def _book_dataset(config: LearnerConfig, bundle: AgentBundle) -> tf.data.Dataset:
    """The book's `ReverbReplayBuffer.as_dataset`: one Reverb stream per batch slot (up to 32), an op per item."""
    buffer = reverb_replay_buffer.ReverbReplayBuffer(
        bundle.replay_data_spec, REPLAY_TABLE, sequence_length=config.sequence_length(),
        server_address=config.replay_address, rate_limiter_timeout_ms=int(config.no_data_timeout_s * 1000))
    items = config.batch_size * config.train_steps_per_call // bundle.envs_per_item
    dataset = buffer.as_dataset(sample_batch_size=items,
                                num_steps=config.sequence_length(), num_parallel_calls=config.parallel_calls())
    # TF-Agents repeats each item's info along its steps; one value per item is what the learner uses.
    return dataset.map(lambda experience, info: (experience, tf.nest.map_structure(lambda t: t[:, 0], info)))


def _reverb_streams(config: LearnerConfig, bundle: AgentBundle) -> tf.data.Dataset:
    """`parallel_calls()` Reverb TrajectoryDatasets, each batching its share of the batch in C++.

    Per item this costs no tf.data map or interleave step, unlike `as_dataset` (bench/learner_throughput.py).
    """
    length = config.sequence_length()
    spec = bundle.replay_data_spec
    shapes = tf.nest.map_structure(lambda s: tf.TensorShape([length]).concatenate(s.shape), spec)
    dtypes = tf.nest.map_structure(lambda s: s.dtype, spec)
    total = config.batch_size * config.train_steps_per_call // bundle.envs_per_item  # items per batch
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


def make_train_fn(bundle: AgentBundle, batch_size: int, steps_per_call: int):
    """A graph function running `steps_per_call` SGD steps on consecutive slices of one sampled batch.

    Several steps per call amortize the Python -> TF dispatch that dominates a small network's step.
    Called as `train(experience, weights)` (importance weights, or None); returns the loss of the last
    step and the TD errors of every sampled item (for prioritized replay).
    """
    agent = bundle.agent
    if steps_per_call == 1:
        @common.function(autograph=False)
        def train_once(experience, weights):
            info = agent.train(experience, weights=weights)
            return info.loss, info.extra.td_error

        return train_once

    @common.function(autograph=True)
    def train_many(experience, weights):
        loss = tf.constant(0.0)
        td_errors = tf.TensorArray(tf.float32, size=steps_per_call)
        for i in tf.range(steps_per_call):
            window = slice(i * batch_size, (i + 1) * batch_size)
            batch = tf.nest.map_structure(lambda t, window=window: t[window], experience)
            info = agent.train(batch, weights=None if weights is None else weights[window])
            loss = info.loss
            td_errors = td_errors.write(i, info.extra.td_error)
        return loss, td_errors.concat()

    return train_many


def crossed(before: int, after: int, interval: int) -> bool:
    """True if a multiple of `interval` lies in (before, after] (steps advance by train_steps_per_call)."""
    return after // interval > before // interval


class Learner:
    """Owns the agent, its checkpoints and the train loop; `run()` returns the exit code."""

    def __init__(self, config: LearnerConfig):
        self.config = config
        self.bundle = build_agent(config)
        self.summary_dir = config.path("learner")
        self.checkpoints = LearnerCheckpoints(os.path.join(self.summary_dir, "checkpoints"), max_to_keep=3,
                                              agent=self.bundle.agent, train_step=self.bundle.train_step)
        self.train = make_train_fn(self.bundle, config.batch_size, config.train_steps_per_call)
        self.writer = tf.summary.create_file_writer(self.summary_dir)
        self.scalars = GraphScalars(self.writer)
        self.priorities: PriorityUpdater | None = None
        self.policy_saver: policy_saver.PolicySaver | None = None  # made at the first export, then reused
        self.policy_weights = FlatWeights(self.bundle.policy_variables)

    @property
    def step(self) -> int:
        """Current train step (restored from the checkpoint on start)."""
        return int(self.bundle.train_step.numpy())

    def publish(self, publisher: WeightsPublisher, step: int) -> None:
        """Queues the current policy weights (those of train step `step`) for the variables table."""
        publisher.submit(self.policy_weights.read(), step)

    def save(self) -> None:
        """Writes a learner checkpoint at the current train step (a failed write is logged; training goes on)."""
        if self.checkpoints.save(self.bundle.train_step):
            log.info("checkpoint at train step %d", self.step)
        # Freed heap of sampled batches stays in RSS otherwise (trimming cut the dataset's growth by ~25 %).
        release_free_heap()

    def run(self) -> int:
        """Trains until max_train_steps or a stop signal; always checkpoints and publishes on the way out."""
        config = self.config
        stop = StopSignal()
        health = start_health(config.health_port, "learner")
        client = wait_for_server(config.replay_address, wait_s=config.connect_timeout_s,
                                 call_timeout_s=config.rpc_timeout_s)
        check_table_matches(client, self.bundle, config, role="learner")
        publisher = WeightsPublisher(config.replay_address, config.rpc_timeout_s)
        self.publish(publisher, self.step)
        log.info("learner starting at train step %d (max %d); replay at %s", self.step, config.max_train_steps,
                 config.replay_address)
        health.set(True)
        rates = ReplayRates(client, config.rpc_timeout_s, transitions_per_item=self.bundle.envs_per_item)
        feed = StagedBatches(lambda: sample_dataset(config, self.bundle), finish_batch(config, self.bundle))
        trainer = StagedTrainer(self.train, feed.slots)
        batch_stats = BatchStats(self.bundle, self.config.batch_size, feed.slots, trainer.loss)
        if config.prioritized_replay:
            self.priorities = PriorityUpdater(config.replay_address, REPLAY_TABLE, config.rpc_timeout_s)
        last_time, last_step = time.monotonic(), self.step
        last_warning = 0.0
        step = self.step  # tracked locally: each train call advances the counter by exactly train_steps_per_call
        while step < config.max_train_steps and not stop.requested:
            index = feed.get(timeout_s=1.0)
            if index is None:
                waited = time.monotonic() - feed.idle_since
                if waited >= config.no_data_timeout_s and time.monotonic() - last_warning >= config.no_data_timeout_s:
                    last_warning = time.monotonic()
                    log.warning("no new data for %.0f s (replay below min size, actors stopped, or replay server "
                                "unreachable); waiting", waited)
                    guarded("summaries", self.scalars.write, step, {"replay/seconds_without_data": waited})
                    guarded("progress file", write_progress, self.summary_dir, train_step=step,
                            sgd_steps_per_sec=0.0, status=f"no new data for {waited:.0f} s")
                continue
            before = step
            if self.priorities is None:
                trainer.train(index)
            else:
                envs = self.bundle.envs_per_item
                sample_info = trainer.sample_info(index)
                weights = importance_weights(sample_info.probability, sample_info.table_size,
                                             importance_beta(config, step))
                td_errors = trainer.train_weighted(index, np.repeat(weights, envs))  # one weight per transition
                self.priorities.submit(sample_info.key, item_td_errors(td_errors, envs))
            step = before + config.train_steps_per_call
            if crossed(before, step, config.publish_interval):
                self.publish(publisher, step)
            if crossed(before, step, config.checkpoint_interval):
                self.save()
            if config.export_interval and crossed(before, step, config.export_interval):
                if self.policy_saver is None:
                    self.policy_saver = policy_saver.PolicySaver(self.bundle.agent.policy, batch_size=None)
                guarded("policy export", export_policy, self.policy_saver, os.path.join(self.summary_dir, "policy"),
                        step)
            if crossed(before, step, config.summary_interval):
                now = time.monotonic()
                sgd_rate = (step - last_step) / max(now - last_time, 1e-9)
                last_time, last_step = now, step
                replay = rates.measure()
                guarded("summaries", self.write_summaries, step, batch_stats.measure(index), sgd_rate, replay,
                        publisher)
                stalled = replay.get("seconds_since_insert", 0.0)
                if stalled >= config.no_data_timeout_s and time.monotonic() - last_warning >= config.no_data_timeout_s:
                    last_warning = time.monotonic()
                    log.warning("no new data inserted for %.0f s (actors stopped?); training on stored data", stalled)
            feed.release(index)  # after the summaries, which read the slot's experience
        log.info("stopping at train step %d (%s)", self.step, stop.signal_name or "max_train_steps reached")
        feed.close()
        if self.priorities is not None:
            self.priorities.wait_idle(config.rpc_timeout_s)
            self.priorities.close()
        health.set(False)
        self.save()
        self.publish(publisher, self.step)
        if not publisher.wait_idle(config.rpc_timeout_s):
            log.warning("final weights not confirmed by the replay server within %.0f s", config.rpc_timeout_s)
        guarded("progress file", write_progress, self.summary_dir, train_step=self.step, sgd_steps_per_sec=0.0,
                done=True)
        guarded("summaries", self.writer.flush)
        health.stop()
        return 0

    def write_summaries(self, step: int, loss_and_mean_q: tuple[float, float], sgd_rate: float, replay: dict,
                        publisher) -> None:
        """losses/*, charts/*, replay/* scalars at train step `step` and the progress file for the launcher."""
        if replay.get("inserts_per_sec"):
            # Uniform sampling from a FIFO buffer: sampled data is on average half a buffer old.
            replay["mean_data_age_train_steps"] = replay["size"] / 2 / replay["inserts_per_sec"] * sgd_rate
        loss_value, mean_q = loss_and_mean_q
        scalars = {
            "losses/td_loss": loss_value,
            "charts/mean_q": mean_q,
            "charts/sgd_steps_per_sec": sgd_rate,
            "charts/epsilon_schedule": epsilon_at(self.config, step),
            "charts/publish_lag": step - max(publisher.published_step, 0),
            **{f"replay/{key}": value for key, value in replay.items()},
        }
        if self.priorities is not None:
            scalars.update({"replay/importance_beta": importance_beta(self.config, step),
                            "replay/priority_updates_sent": self.priorities.sent,
                            "replay/priority_updates_dropped": self.priorities.dropped,
                            "replay/priority_updates_failed": self.priorities.failed})
        self.scalars.write(step, scalars)
        write_progress(self.summary_dir, train_step=step, sgd_steps_per_sec=sgd_rate, loss=loss_value,
                       replay_size=replay.get("size", 0))


def run(config: LearnerConfig) -> int:
    """Entry point for `dqn-service learner`."""
    # Before anything else touches TensorFlow: its runtime reads these once.
    intra_op_threads, inter_op_threads = config.tf_threads()
    tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)
    log.info("TensorFlow threads: intra-op %s, inter-op %s", intra_op_threads or "TF's default",
             inter_op_threads or "TF's default")
    return Learner(config).run()

