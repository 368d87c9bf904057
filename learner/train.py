"""The learner process: the book's Reverb dataset -> DqnAgent.train, plus publishing and checkpoints.

dataset = ReverbReplayBuffer(...).as_dataset(sample_batch_size=64, num_steps=2, num_parallel_calls=3)
          .prefetch(3)
Weights + train step go to the `variables` table at start and every `publish_interval` steps;
checkpoints every `checkpoint_interval` steps and on SIGTERM (restored on start).
"""

from __future__ import annotations

import logging
import os
import shutil
import time

import tensorflow as tf
from tf_agents.policies import policy_saver
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.utils import common

from dqn.agent import AgentBundle, build_agent, epsilon_at
from dqn.config import SEQUENCE_LENGTH, LearnerConfig
from dqn.health import start_health
from dqn.progress import write_progress
from dqn.replay import REPLAY_TABLE, WeightsPublisher, check_table_matches, wait_for_server
from dqn.runtime import StopSignal
from learner.stats import ReplayRates

log = logging.getLogger("learner")


def make_dataset(config: LearnerConfig, bundle: AgentBundle) -> tf.data.Dataset:
    """Batches of [batch_size, 2, ...] trajectories; the iterator ends (not hangs) after no_data_timeout_s."""
    buffer = reverb_replay_buffer.ReverbReplayBuffer(
        bundle.agent.collect_data_spec, REPLAY_TABLE, sequence_length=SEQUENCE_LENGTH,
        server_address=config.replay_address, rate_limiter_timeout_ms=int(config.no_data_timeout_s * 1000))
    dataset = buffer.as_dataset(sample_batch_size=config.batch_size, num_steps=SEQUENCE_LENGTH,
                                num_parallel_calls=config.num_parallel_calls)
    return dataset.prefetch(config.prefetch)


def export_policy(bundle: AgentBundle, directory: str, step: int) -> None:
    """Saves the greedy policy as a SavedModel, replacing the previous export atomically."""
    tmp = f"{directory}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    policy_saver.PolicySaver(bundle.agent.policy, batch_size=None).save(tmp)
    old = f"{directory}.old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(directory):
        os.replace(directory, old)
    os.replace(tmp, directory)
    shutil.rmtree(old, ignore_errors=True)
    log.info("exported greedy policy of step %d to %s", step, directory)


class Learner:
    """Owns the agent, its checkpoints and the train loop; `run()` returns the exit code."""

    def __init__(self, config: LearnerConfig):
        self.config = config
        self.bundle = build_agent(config)
        self.summary_dir = config.path("learner")
        self.checkpointer = common.Checkpointer(
            ckpt_dir=os.path.join(self.summary_dir, "checkpoints"), max_to_keep=3,
            agent=self.bundle.agent, train_step=self.bundle.train_step)
        self.checkpointer.initialize_or_restore()
        self.train = common.function(self.bundle.agent.train)
        self.writer = tf.summary.create_file_writer(self.summary_dir)

    @property
    def step(self) -> int:
        """Current train step (restored from the checkpoint on start)."""
        return int(self.bundle.train_step.numpy())

    def publish(self, publisher: WeightsPublisher) -> None:
        """Queues the current policy weights for the variables table."""
        publisher.submit([v.numpy() for v in self.bundle.policy_variables], self.step)

    def save(self) -> None:
        """Writes a learner checkpoint at the current train step."""
        self.checkpointer.save(global_step=self.bundle.train_step)
        log.info("checkpoint at train step %d", self.step)

    def run(self) -> int:
        """Trains until max_train_steps or a stop signal; always checkpoints and publishes on the way out."""
        config = self.config
        stop = StopSignal()
        health = start_health(config.health_port, "learner")
        client = wait_for_server(config.replay_address, wait_s=config.connect_timeout_s,
                                 call_timeout_s=config.rpc_timeout_s)
        check_table_matches(client, self.bundle, config, role="learner")
        publisher = WeightsPublisher(config.replay_address)
        self.publish(publisher)
        log.info("learner starting at train step %d (max %d); replay at %s", self.step, config.max_train_steps,
                 config.replay_address)
        health.set(True)
        rates = ReplayRates(client, config.rpc_timeout_s)
        iterator = iter(make_dataset(config, self.bundle))
        last_time, last_step = time.monotonic(), self.step
        while self.step < config.max_train_steps and not stop.requested:
            try:
                experience, _ = next(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                log.warning("no new data for %.0f s (replay below min size, actors stopped or server down); "
                            "waiting", config.no_data_timeout_s)
                with self.writer.as_default(step=self.step):
                    tf.summary.scalar("replay/no_data_events", 1)
                iterator = iter(make_dataset(config, self.bundle))
                continue
            loss_info = self.train(experience)
            step = self.step
            if step % config.publish_interval == 0:
                self.publish(publisher)
            if step % config.checkpoint_interval == 0:
                self.save()
            if config.export_interval and step % config.export_interval == 0:
                export_policy(self.bundle, os.path.join(self.summary_dir, "policy"), step)
            if step % config.summary_interval == 0:
                now = time.monotonic()
                sgd_rate = (step - last_step) / max(now - last_time, 1e-9)
                last_time, last_step = now, step
                self.write_summaries(experience, loss_info, sgd_rate, rates.measure(), publisher)
        log.info("stopping at train step %d (%s)", self.step, stop.signal_name or "max_train_steps reached")
        health.set(False)
        self.save()
        self.publish(publisher)
        if not publisher.wait_idle(config.rpc_timeout_s):
            log.warning("final weights not confirmed by the replay server within %.0f s", config.rpc_timeout_s)
        write_progress(self.summary_dir, train_step=self.step, sgd_steps_per_sec=0.0, done=True)
        self.writer.flush()
        health.stop()
        return 0

    def write_summaries(self, experience, loss_info, sgd_rate: float, replay: dict, publisher) -> None:
        """losses/*, charts/*, replay/* scalars and the progress file for the launcher."""
        step = self.step
        q_values, _ = self.bundle.agent._q_network(experience.observation[:, 0], training=False)
        with self.writer.as_default(step=step):
            tf.summary.scalar("losses/td_loss", loss_info.loss)
            tf.summary.scalar("charts/mean_q", tf.reduce_mean(tf.reduce_max(q_values, axis=-1)))
            tf.summary.scalar("charts/sgd_steps_per_sec", sgd_rate)
            tf.summary.scalar("charts/epsilon_schedule", epsilon_at(self.config, step))
            tf.summary.scalar("charts/publish_lag", step - max(publisher.published_step, 0))
            for key, value in replay.items():
                tf.summary.scalar(f"replay/{key}", value)
        write_progress(self.summary_dir, train_step=step, sgd_steps_per_sec=sgd_rate, loss=float(loss_info.loss),
                       replay_size=replay.get("size", 0))


def run(config: LearnerConfig) -> int:
    """Entry point for `dqn-service learner`."""
    return Learner(config).run()

