"""The learner process: sampled replay batches -> DqnAgent.train, plus periodic publishing, checkpoints and exports.

Batches come from the input pipeline (dqn/replay_layout/dataset.py) through staged variables
(learner/staged_batches.py) and are unpacked by the replay layout (dqn/replay_layout/). Weights + train step go to
the `variables` table at start and every `publish_interval` steps; checkpoints every `checkpoint_interval` steps
and on SIGTERM (restored on start). At max_train_steps it checkpoints, publishes, and stays up idle saying "done"
until it is stopped. Batches holding items no actor writes are skipped and those items deleted
(learner/bad_batches.py).
Each periodic job is a trigger, built by `make_triggers` (learner/triggers.py). One applies the evaluator's latest
reset request (evaluator/reset_rule.py, dqn/remote/reset_requests.py) as soon as it arrives: a fresh Q-network, an
emptied replay table and an epsilon schedule counted from that step, published at once.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import tensorflow as tf
from tf_agents.policies import policy_saver
from tf_agents.utils import common

from dqn.builder import DqnBuilder
from dqn.model.agent import AgentBundle, reinitialize_q_networks
from dqn.model.flat_weights import FlatWeights
from dqn.model.networks import fast_bfloat16, resolved_compute_dtype
from dqn.model.policy_export import export_policy
from dqn.process.health import start_health
from dqn.process.log_throttle import LogThrottle
from dqn.process.progress import write_progress
from dqn.process.runtime import StopSignal, release_free_heap
from dqn.process.summaries import GraphScalars
from dqn.process.usage import Laps
from dqn.remote.connection import RemoteConnection
from dqn.remote.replay_client import wait_for_servers
from dqn.remote.reset_requests import ResetRequestWatcher
from dqn.remote.role_reports import RoleReporter
from dqn.remote.weights_publisher import WeightsPublisher
from dqn.replay_layout.item_checks import item_problems
from dqn.replay_layout.items import REPLAY_TABLE
from dqn.resolve import run_env_specs
from dqn.settings.config import LearnerConfig, role_dir
from learner.bad_batches import BadBatches
from learner.checkpoints import LearnerCheckpoints
from learner.non_finite import FiniteVariables, NonFiniteUpdates, is_non_finite_loss
from learner.priority_updates import PriorityUpdater, importance_beta, importance_weights
from learner.staged_batches import StagedBatches
from learner.staged_trainer import BatchStats, StagedTrainer
from learner.stats import NoInsertWarning, ReplayRates
from learner.summaries import LearnerSummaries
from learner.triggers import ResetRequestTrigger, make_triggers
from learner.write_guard import try_write

log = logging.getLogger("learner")


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


class Learner:
    """Owns the agent, its checkpoints and the train loop; `run()` returns the exit code."""

    def __init__(self, config: LearnerConfig):
        self.config = config
        self.builder = DqnBuilder(config, run_env_specs(config))
        self.bundle = self.builder.agent
        self.layout = self.builder.layout
        self.directory = config.path(role_dir("learner"))  # summaries, progress file, checkpoints/, policy/
        # Where the actors' epsilon schedule starts, and the last reset request applied: both survive restarts.
        self.exploration_start = tf.Variable(0, dtype=tf.int64, trainable=False, name="exploration_start")
        self.reset_request_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="reset_request_step")
        self.checkpoints = LearnerCheckpoints(os.path.join(self.directory, "checkpoints"), max_to_keep=3,
                                              settings=config, agent=self.bundle.agent,
                                              train_step=self.bundle.train_step,
                                              exploration_start=self.exploration_start,
                                              reset_request_step=self.reset_request_step)
        self._heal_applied_request()
        self.reset_requests: ResetRequestWatcher | None = None
        self.reset_trigger: ResetRequestTrigger | None = None  # set by `run`; counts the requests it refused
        self.bad_batches = BadBatches(config.replay_address, config.rpc_timeout_s,
                                      self.builder.table_signatures()[REPLAY_TABLE])
        self.replay: RemoteConnection | None = None  # set on connecting; empties the replay table at a reset
        self.train = make_train_fn(self.bundle, config.train_batch_size(), config.train_steps_per_call)
        self.writer = tf.summary.create_file_writer(self.directory)
        self.scalars = GraphScalars(self.writer)
        self.priorities: PriorityUpdater | None = None
        self.policy_saver: policy_saver.PolicySaver | None = None  # made at the first export, then reused
        self.policy_weights = FlatWeights(self.bundle.policy_variables)
        self.no_data_log = LogThrottle(config.no_data_timeout_s)  # both "no new data" warnings share it
        self.non_finite = NonFiniteUpdates()
        self.rollback_log = LogThrottle(60.0)  # data that stays non-finite would roll back every few calls
        self.illegal_target_actions = 0  # summarized batches' target actions that their stored masks forbid
        # The agent's variables are listed once (listing walks its modules, milliseconds); the optimizer's are asked
        # each time, because it makes its slots at the first update.
        agent_variables = list(self.bundle.agent.variables)
        self.finite_variables = FiniteVariables(lambda: [*agent_variables, *self.optimizer.variables])

    def _heal_applied_request(self) -> None:
        """A restored last applied request above the train step was never genuine: it would block later ones.

        Earlier versions applied any request, and checkpointed a forged huge step as the last applied one. A
        genuine request is at most the step it was applied at, which is the exploration start it set.
        """
        applied, start = int(self.reset_request_step.numpy()), int(self.exploration_start.numpy())
        if applied > self.step:
            log.warning("the checkpoint's last applied reset request (train step %d) lies after its own train step "
                        "%d, which no genuine request can: taking %d (the last reset's step) instead", applied,
                        self.step, start)
            self.reset_request_step.assign(start)

    def refused_counts(self) -> dict[str, int]:
        """Control items and replay batches this learner refused so far, for its summaries and progress file."""
        requests = 0
        if self.reset_requests is not None:
            requests += self.reset_requests.refused.count
        if self.reset_trigger is not None:
            requests += self.reset_trigger.refused.count
        return {"refused_reset_requests": requests, "bad_batches_skipped": self.bad_batches.skipped,
                "bad_items_deleted": self.bad_batches.deleted}

    @property
    def optimizer(self) -> tf.keras.optimizers.Optimizer:
        """The agent's optimizer (TF-Agents keeps it private; its slots are checkpointed with the agent)."""
        return self.bundle.agent._optimizer  # noqa: SLF001 - no public accessor

    @property
    def step(self) -> int:
        """Current train step (restored from the checkpoint on start)."""
        return int(self.bundle.train_step.numpy())

    def publish(self, publisher: WeightsPublisher, step: int) -> None:
        """Queues the current policy weights (those of train step `step`) and exploration start for publishing."""
        if self.weights_finite("publication"):
            publisher.submit(self.policy_weights.read(), step, int(self.exploration_start.numpy()))

    def weights_finite(self, what: str) -> bool:
        """True if every agent variable is finite; else rolls back (logged) so `what` never sees NaN weights."""
        if self.finite_variables.all_finite():
            return True
        self.roll_back(f"non-finite weights before a {what}")
        return False

    def roll_back(self, reason: str) -> None:
        """Restores the last good checkpoint (a fresh Q-network where there is none) and says so in one line."""
        restored = self.checkpoints.restore_latest()
        if restored is None or not self.finite_variables.all_finite():
            reinitialize_q_networks(self.bundle)
            for variable in self.optimizer.variables:  # its moments may be non-finite too
                variable.assign(tf.zeros_like(variable))
            restored = "a fresh Q-network (no good checkpoint)"
        self.non_finite.rolled_back()
        if self.rollback_log.ready():
            log.error("%s: rolled back to %s at train step %d (%d non-finite updates skipped and %d roll-backs so "
                      "far; repeats are logged once a minute)", reason, restored, self.step,
                      self.non_finite.skipped_total, self.non_finite.rollbacks)

    def apply_reset_request(self, step: int, requested: int) -> None:
        """Applies reset request `requested` at train step `step`: fresh Q-network, empty replay, epsilon from `step`.

        The request and the new exploration start are checkpointed with the agent; the caller publishes.
        """
        reinitialize_q_networks(self.bundle)
        replay = "replay emptied" if self.empty_replay() else "replay kept (not emptied)"
        self.exploration_start.assign(step)
        self.reset_request_step.assign(requested)
        log.info("train step %d: the evaluator saw the run stuck partway (evaluation of train step %d): "
                 "Q-network re-initialized, epsilon schedule restarted, %s; optimizer kept", step, requested, replay)
        try_write("summaries", self.scalars.write, step, {"charts/exploration_start": float(step)})

    def empty_replay(self) -> bool:
        """Removes every item of the replay table (under a deadline); False, logged, where that failed.

        Why empty it: the stuck attempt's data are long episodes of one habit, with few of the early failures a
        fresh network learns its first values from; emptied, the table refills with the fresh network's own
        exploration, which the actors write quickly.
        """
        if self.replay is None:
            return False
        try:
            self.replay.call(lambda c: c.reset(REPLAY_TABLE))
        except Exception as error:  # noqa: BLE001 - the fresh network trains on the kept replay instead
            log.warning("could not empty the replay table at the reset (%s); training on the kept replay", error)
            return False
        return True

    def save(self) -> None:
        """Writes a learner checkpoint at the current train step (a failed write is logged; training goes on)."""
        if not self.weights_finite("checkpoint"):
            return
        if self.checkpoints.save(self.bundle.train_step):
            log.info("checkpoint at train step %d", self.step)
        release_free_heap()  # freed heap of sampled batches stays in RSS otherwise

    def export(self, step: int) -> None:
        """Exports the greedy policy as a SavedModel under <root_dir>/learner/policy."""
        if not self.weights_finite("policy export"):
            return
        if self.policy_saver is None:
            self.policy_saver = policy_saver.PolicySaver(self.builder.make_export_policy(), batch_size=None)
        try_write("policy export", export_policy, self.policy_saver, os.path.join(self.directory, "policy"), step)

    def run(self) -> int:
        """Trains until max_train_steps or a stop signal; always checkpoints and publishes on the way out.

        At max_train_steps the learner stays up, idle and serving, until it is stopped: every shipped restart
        policy (Compose `unless-stopped`, Kubernetes `Always`, Swarm `any`) would restart a learner that exits,
        and a restarted one would load TensorFlow, checkpoint and publish again, forever.
        """
        config = self.config
        stop = StopSignal()
        health = start_health(config, "learner")
        clients, publisher = self._connect()
        health.set(True)
        feed = StagedBatches(self.builder.make_dataset, self.layout.finish_batch(),
                             check=lambda experience, _: item_problems(experience, self.bundle.action_spec),
                             on_bad=self.bad_batches.reject, on_unreadable=self.bad_batches.unreadable)
        trainer = StagedTrainer(self.train, feed.slots)
        if config.prioritized_replay:
            self.priorities = PriorityUpdater(config.replay_address, REPLAY_TABLE, config.rpc_timeout_s)
        rates = ReplayRates(clients.replay, config.rpc_timeout_s, self.layout.transitions_per_item)
        summaries = LearnerSummaries(self, rates, BatchStats(self.bundle, config.train_batch_size(), feed.slots,
                                                             trainer.loss), publisher)
        step = self.step  # tracked locally: each train call advances the counter by exactly train_steps_per_call
        laps, sgd_steps, finished = Laps("data_wait_s", "train_s"), [0], False
        reporter = RoleReporter(config.control_address_resolved(), config.rpc_timeout_s, "learner", "0", lambda: {
            **laps.seconds, "sgd_steps": sgd_steps[0], "train_step": step, "batch": config.train_batch_size(),
            "publish_interval": config.publish_interval, "samples_per_insert": config.samples_per_insert,
            "finished": float(finished)}, config.report_interval_s, config.machine_name)
        triggers = make_triggers(
            config, step, reset_requests=self.reset_requests, applied_request=int(self.reset_request_step.numpy()),
            apply_reset_request=self.apply_reset_request, publish=lambda at: self.publish(publisher, at),
            checkpoint=lambda _: self.save(), export=self.export, write_summaries=summaries.write,
            warn_no_inserts=NoInsertWarning(rates, config.no_data_timeout_s, self.no_data_log))
        self.reset_trigger = next(t for t in triggers if isinstance(t, ResetRequestTrigger))
        while step < config.max_train_steps and not stop.requested:
            health.beat()
            laps.start()
            index = feed.get(timeout_s=1.0)
            laps.lap("data_wait_s")
            if index is None:
                self._report_waiting_for_data(step, time.monotonic() - feed.idle_since)
                continue
            trained = self._train_step(trainer, index, step)
            laps.lap("train_s")
            if trained:
                step += config.train_steps_per_call
                sgd_steps[0] += config.train_steps_per_call
            else:  # skipped, or rolled back: the counter says where training stands
                step = self.step
            summaries.slot = index
            for trigger in triggers:
                trigger(step)
            feed.release(index)  # after the summaries, which read the slot's experience
        finished = not stop.requested
        log.info("stopping at train step %d (%s)", self.step, stop.signal_name or "max_train_steps reached")
        feed.close()
        self._finish(publisher, health, finished)
        if finished:
            log.info("done: train step %d of max_train_steps %d, checkpointed and published; staying up idle until "
                     "stopped", self.step, config.max_train_steps)
            while not stop.wait(1.0):  # idle is this loop's work: the stall watchdog must not restart it
                health.beat()
            log.info("stopping (%s)", stop.signal_name)
            health.set(False)
        reporter.close()
        health.stop()
        return 0

    def _connect(self) -> tuple:
        """(server clients, weights publisher) once the servers answer with matching tables; first weights out."""
        config = self.config
        clients = wait_for_servers(config)
        self.builder.check_server_tables(clients, role="learner")
        self.replay = RemoteConnection(config.replay_address, config.rpc_timeout_s, "emptying the replay table",
                                       client=clients.replay)
        self.reset_requests = ResetRequestWatcher(config.control_address_resolved(), config.rpc_timeout_s,
                                                  key=config.shared_key)
        publisher = WeightsPublisher(config.control_address_resolved(), config.rpc_timeout_s, key=config.shared_key)
        self.publish(publisher, self.step)
        log.info("learner starting at train step %d (max %d); replay at %s%s", self.step, config.max_train_steps,
                 config.replay_address, _control_note(config))
        return clients, publisher

    def _train_step(self, trainer: StagedTrainer, index: int, step: int) -> bool:
        """train_steps_per_call SGD steps on staged slot `index`; with prioritized replay, new priorities out.

        False when a step's loss was NaN or infinite: that update was skipped (counted; a run of them rolls back).
        """
        try:
            if self.priorities is None:
                trainer.train(index)
            else:
                sample_info = trainer.sample_info(index)
                weights = importance_weights(sample_info.probability, sample_info.table_size,
                                             importance_beta(self.config, step))
                rows = np.repeat(weights, self.layout.transitions_per_item)  # one weight per transition
                td_errors = trainer.train_weighted(index, rows)
                self.priorities.submit(sample_info.key, self.layout.item_td_errors(td_errors))
        except tf.errors.InvalidArgumentError as error:
            if not is_non_finite_loss(error):
                raise
            # The loss check and the optimizer's update are not ordered inside the graph call, so the update may
            # have run: check the weights now rather than at the next publication.
            if self.non_finite.skipped():
                self.roll_back(f"{self.non_finite.max_in_a_row} non-finite losses in a row")
            elif not self.finite_variables.all_finite():
                self.roll_back("a non-finite loss left non-finite weights")
            return False
        self.non_finite.applied()
        return True

    def _report_waiting_for_data(self, step: int, waited: float) -> None:
        """Logs, records and reports a wait for data of no_data_timeout_s or more (throttled by `no_data_log`)."""
        if waited >= self.config.no_data_timeout_s and self.no_data_log.ready():
            log.warning("no new data for %.0f s (replay below min size, actors stopped, or replay server "
                        "unreachable); waiting", waited)
            try_write("summaries", self.scalars.write, step, {"replay/seconds_without_data": waited})
            try_write("progress file", write_progress, self.directory, train_step=step, sgd_steps_per_sec=0.0,
                      status=f"no new data for {waited:.0f} s")

    def _finish(self, publisher: WeightsPublisher, health, finished: bool) -> None:
        """The way out of training: pending priorities sent, a final checkpoint and publication, progress done.

        A stopped learner reports NOT_SERVING first; a `finished` one (max_train_steps) stays SERVING and says
        "done" in its progress file (`dqn-service status`, `local`).
        """
        config = self.config
        if self.priorities is not None:
            self.priorities.wait_idle(config.rpc_timeout_s)
            self.priorities.close()
        if self.reset_requests is not None:
            self.reset_requests.close()
        if not finished:
            health.set(False)
        self.save()
        self.publish(publisher, self.step)
        if not publisher.wait_idle(config.rpc_timeout_s):
            log.warning("final weights not confirmed by the replay server within %.0f s", config.rpc_timeout_s)
        status = (f"done: max_train_steps {config.max_train_steps} reached; idle until stopped" if finished
                  else "stopped")
        try_write("progress file", write_progress, self.directory, train_step=self.step, sgd_steps_per_sec=0.0,
                  done=True, finished=finished, status=status, illegal_actions=self.illegal_target_actions,
                  **self.refused_counts())
        try_write("summaries", self.writer.flush)


def _control_note(config: LearnerConfig) -> str:
    """Where weights and reset requests go, for the start line, when that is not the replay server."""
    control = config.control_address_resolved()
    return "" if control == config.replay_address else f"; weights and reset requests at {control}"


def run(config: LearnerConfig) -> int:
    """Entry point for `dqn-service learner`."""
    # Before anything else touches TensorFlow: its runtime reads these once.
    intra_op_threads, inter_op_threads = config.tf_threads()
    tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)
    log.info("TensorFlow threads: intra-op %s, inter-op %s", intra_op_threads or "TF's default",
             inter_op_threads or "TF's default")
    if config.compute_dtype == "bfloat16" and not fast_bfloat16():
        log.warning("compute_dtype bfloat16 on a CPU without AMX or AVX512-BF16 (and no GPU): TensorFlow emulates "
                    "it, slower than float32; set --compute-dtype float32 or auto")
    elif config.compute_dtype == "auto":
        log.info("compute_dtype auto: the Q-network computes in %s here", resolved_compute_dtype(config))
    return Learner(config).run()

