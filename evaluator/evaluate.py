"""The evaluator process: policy episodes whenever the published train step advances.

`eval_episodes` envs run side by side, one episode each, with the policy in numpy for a plain MLP or stepped
inside the graph otherwise (evaluator/episodes.py). The episodes are independent, so this equals running them one
after another, only faster. Every evaluation starts the same episodes (the same env seeds), so returns compare
across train steps. Each evaluation's metrics (evaluator/metrics.py: average return, average episode length, the
success rate where the env reports one, and any metric registered there) go to TensorBoard under `eval/` and into
`evals.jsonl`: the average return as the record's `average_return` (its score, beside its `standard_error` and the
re-check's `confirmed_return`), the others under the record's `metrics`.

An evaluation whose average beats the kept best's score and comes within one standard error of the target return
(`target_return`, else the env's reward_threshold; any new best when there is neither) is re-checked on
`eval_confirm_episodes` fresh episodes (new seeds each time) before its policy is kept (evaluator/best.py);
`dqn-service local` counts a run as solved when the re-check's average reaches the target. The best of many noisy
evaluation averages overrates its policy, and the policy a run hands out must hold on episodes that played no part
in choosing it. The margin is there because the evaluation's episodes are a fixed sample: where the target sits at
what the best policy averages (Taxi's 8), a sample of ten can hold that policy below it for good. Only candidates
near the target are re-checked because a re-check holds up the next evaluations: re-checking every improvement of
a still-improving policy would leave gaps in which a short-lived solving policy goes unseen.
Episodes that an env fault cut short are left out of every metric (a partial return says nothing about the
policy), and a policy with no whole episode is not scored.

A run that came near its target and then fell back is reset (evaluator/reset_rule.py): the evaluator asks, through the
`learner_requests` table, and the learner starts a fresh Q-network (`fallback_reset_patience`).

Atari ids follow Nature DQN's evaluation protocol (Mnih et al. 2015, Methods): epsilon 0.05 and at most 5 minutes
of play (18,000 frames). Otherwise, a greedy policy that never presses FIRE in Breakout would wait out the episode
cap in every episode of every early evaluation.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from dqn.builder import DqnBuilder
from dqn.envs.atari import is_atari
from dqn.envs.making import EnvOptions, registered_episode_limit
from dqn.files import append_line
from dqn.model.flat_weights import FlatWeights
from dqn.process.health import start_health
from dqn.process.log_throttle import LogThrottle
from dqn.process.progress import write_progress
from dqn.process.runtime import StopSignal, use_one_core
from dqn.process.summaries import GraphScalars
from dqn.process.usage import Laps
from dqn.process.write_guard import WriteGuard
from dqn.remote.replay_client import wait_for_servers
from dqn.remote.reset_requests import ResetRequestSender
from dqn.remote.role_reports import RoleReporter
from dqn.remote.weights_puller import WeightsPuller
from dqn.remote.weights_wire import PublishedWeights
from dqn.resolve import run_env_specs
from dqn.settings.config import EvaluatorConfig, role_dir
from evaluator.best import BestPolicy, standard_error
from evaluator.episodes import PolicyEpisodes, make_episode_runner
from evaluator.metrics import AverageReturn, MetricContext, make_metrics
from evaluator.random_baseline import kept_below_random_play, measure_random_play, read_random_play, save_random_play
from evaluator.reset_rule import FallbackResetRule

log = logging.getLogger("evaluator")
#: The evaluator's writes to the run root (summaries, results, best policy), which a full disk must not stop.
try_write = WriteGuard("evaluator")


#: Nature DQN's evaluation of Atari agents: epsilon 0.05, episodes of at most 5 minutes at 60 frames/s.
ATARI_EVAL_EPSILON = 0.05
ATARI_EVAL_FRAMES = 18_000
#: The cap on an evaluation episode of an env with no episode limit of its own (and none set): a policy that has
#: learned never to fail would otherwise keep the evaluator in one episode for good.
UNLIMITED_ENV_EVAL_STEPS = 10_000
#: Seconds random play may hold up the first evaluation (its episodes run to the evaluation cap at worst).
RANDOM_PLAY_LIMIT_S = 120
#: Seconds between "waiting for first weights" log lines.
WAIT_LOG_INTERVAL_S = 15


def evaluation_protocol(config: EvaluatorConfig) -> tuple[float, EnvOptions]:
    """(epsilon, env options) of evaluation episodes, with eval_epsilon / eval_max_episode_steps auto resolved."""
    atari = is_atari(config.env_id)
    epsilon = config.eval_epsilon
    if epsilon is None:
        epsilon = ATARI_EVAL_EPSILON if atari else 0.0
    options = EnvOptions.from_config(config).for_evaluation()
    cap = config.eval_max_episode_steps
    if not cap and atari:  # Nature DQN's 5 minutes, or the training cap where that is shorter
        cap = min(filter(None, (ATARI_EVAL_FRAMES // config.atari_frame_skip, options.max_episode_steps)))
    elif not cap and not options.max_episode_steps and registered_episode_limit(config.env_id) is None:
        cap = UNLIMITED_ENV_EVAL_STEPS
    if cap:
        options = dataclasses.replace(options, max_episode_steps=cap)
    return epsilon, options


def metric_context(config: EvaluatorConfig, builder: DqnBuilder) -> MetricContext:
    """What the evaluation metrics know of the run: the env, its action spec and the target return."""
    return MetricContext(config.env_id, builder.agent.action_spec,
                         config.resolved_target_return(builder.reward_threshold))


def make_episodes(config: EvaluatorConfig, builder: DqnBuilder, num_episodes: int | None = None,
                  context: MetricContext | None = None) -> PolicyEpisodes:
    """`num_episodes` (default eval_episodes) envs and a policy loop, built once and reused by every evaluation.

    Give it weights with `load(variables)` before `run`, which returns the registered metrics' values; the metrics
    are built with `context` (default: `metric_context(config, builder)`).
    """
    if context is None:
        context = metric_context(config, builder)
    epsilon, options = evaluation_protocol(config)
    env = builder.make_envs(num_episodes or config.eval_episodes, options=options)
    cap = f"{options.max_episode_steps} agent steps" if options.max_episode_steps else "the env's own limit"
    if num_episodes is None:
        log.info("evaluation episodes: epsilon %g, at most %s", epsilon, cap)
    return make_episode_runner(builder.make_evaluation_policy(), builder.agent.action_spec, env, epsilon=epsilon,
                               metrics=make_metrics(context), valid=builder.agent.valid_actions)


def confirmation_seed(seed: int, train_step: int) -> int:
    """Env seeds of a re-check: new for every train step and apart from the evaluation's own episodes."""
    return int(np.random.SeedSequence([seed, train_step, 7]).generate_state(1)[0])


@dataclasses.dataclass
class Evaluation:
    """One scored evaluation: its weights, its metrics' values and the evals.jsonl record being filled in."""

    weights: PublishedWeights
    values: dict[str, float]
    record: dict
    started: float  # time.monotonic() when its episodes started
    confirmed_return: float | None = None  # the re-check's average return, where there was a re-check

    @property
    def train_step(self) -> int:
        """The train step the weights were published at."""
        return self.weights.train_step

    @property
    def average_return(self) -> float:
        """The score of the evaluation's own episodes."""
        return self.values[AverageReturn.name]

    @property
    def standard_error(self) -> float:
        """Of its average return, from the spread of its episodes' returns (recorded: it decides the re-check)."""
        return self.record["standard_error"]


class Evaluator:
    """Scores published weights, keeps the best policy, asks for resets and records each evaluation.

    Each method is one step of the loop in `run`. `connect` builds one for the evaluator role.
    """

    def __init__(self, config: EvaluatorConfig, target: float | None, episodes: PolicyEpisodes,
                 confirmation: PolicyEpisodes | None, best: BestPolicy, reset_requests: ResetRequestSender,
                 puller: WeightsPuller, summary_dir: str, stop_requested: Callable[[], bool]):
        self._config, self._target = config, target
        self.episodes, self.confirmation, self.best = episodes, confirmation, best
        self._reset_rule = FallbackResetRule(config.fallback_reset_patience, target)
        self._reset_requests, self._puller, self._stop_requested = reset_requests, puller, stop_requested
        os.makedirs(summary_dir, exist_ok=True)
        self._writer = tf.summary.create_file_writer(summary_dir)
        self._scalars = GraphScalars(self._writer)
        self._results_path = os.path.join(summary_dir, "evals.jsonl")
        self._summary_dir = summary_dir
        self._last_evaluated: int | None = None
        self._wait_notices = LogThrottle(WAIT_LOG_INTERVAL_S)
        self._refused_reported = 0

    @classmethod
    def from_config(cls, config: EvaluatorConfig, stop_requested: Callable[[], bool]) -> Evaluator:
        """Waits for the replay server, then builds the episodes, the weights puller and the best policy."""
        builder = DqnBuilder(config, run_env_specs(config))
        clients = wait_for_servers(config)
        builder.check_server_tables(clients, role="evaluator")
        context = metric_context(config, builder)
        episodes = make_episodes(config, builder, context=context)
        confirmation = make_episodes(config, builder, config.eval_confirm_episodes, context) \
            if config.eval_confirm_episodes else None
        log.info("evaluation episodes: %s", episodes.describe())
        puller = WeightsPuller(config.control_address_resolved(), config.rpc_timeout_s, key=config.shared_key)
        summary_dir = config.path(role_dir("evaluator"))
        os.makedirs(summary_dir, exist_ok=True)
        bundle = builder.agent
        best = BestPolicy(summary_dir, builder.make_export_policy(), FlatWeights(bundle.policy_variables))
        reset_requests = ResetRequestSender(config.control_address_resolved(), config.rpc_timeout_s,
                                            client=clients.control, key=config.shared_key)
        return cls(config, context.target_return, episodes, confirmation, best, reset_requests, puller, summary_dir,
                   stop_requested)

    def measure_random_play(self) -> None:
        """Random play's score, once per run (evaluator/random_baseline.py), on the re-check episodes if any."""
        if read_random_play(self._summary_dir) is not None:
            return
        deadline = time.monotonic() + RANDOM_PLAY_LIMIT_S
        record = measure_random_play(self.confirmation or self.episodes, self._config.seed,
                                     lambda: self._stop_requested() or time.monotonic() > deadline)
        if record is not None:
            try_write("random play", save_random_play, self._summary_dir, record)
        elif not self._stop_requested():
            log.info("random play not measured: its episodes took longer than %d s (or every one ended in an env "
                     "fault); the kept policy is not compared with it", RANDOM_PLAY_LIMIT_S)

    def new_weights(self) -> PublishedWeights | None:
        """Weights at least eval_interval train steps past the last evaluated ones, else None.

        First it retries delivering a reset request that is still pending. Weights the puller refused (a bad
        signature, a train step no learner could reach: dqn/remote/item_trust.py) never come here, so they are
        never evaluated nor kept as the best policy; their count goes to TensorBoard (`eval/refused_weights`).
        """
        self._reset_requests.flush()
        self._puller.request()
        refused = self._puller.refused.count
        if refused != self._refused_reported:
            self._refused_reported = refused
            self._scalars.write(self._last_evaluated or 0, {"eval/refused_weights": float(refused)})
        weights = self._puller.latest()
        if weights is None:
            if self._last_evaluated is None and self._wait_notices.ready():
                log.info("waiting for first weights from the learner (%s)", self._puller.status)
            return None
        if self._last_evaluated is not None and weights.train_step < self._last_evaluated + self._config.eval_interval:
            return None
        return weights

    def evaluate(self, weights: PublishedWeights) -> Evaluation | None:
        """Plays the evaluation episodes. Returns None if a stop request cut them short or no episode was whole."""
        self.episodes.load(weights.variables)
        started = time.monotonic()
        values = self.episodes.run(self._config.seed + 99_991, self._stop_requested)
        if self._stop_requested():
            return None
        self._last_evaluated = weights.train_step
        if not self.episodes.whole_episodes:  # no whole episode to score the policy on: wait for the next weights
            log.warning("train step %d: every evaluation episode ended in an env fault; not scored",
                        weights.train_step)
            return None
        # The score is the record's own field (every reader ranks and decides by it); the other metrics are kept
        # apart, so a new metric never collides with a field of the record.
        record = {"train_step": weights.train_step, "average_return": values[AverageReturn.name],
                  "metrics": {name: value for name, value in values.items() if name != AverageReturn.name},
                  "episodes": self.episodes.whole_episodes,
                  "standard_error": standard_error(self.episodes.whole_returns)}
        if self.episodes.cut_short:
            record["cut_short_episodes"] = self.episodes.cut_short
        return Evaluation(weights, values, record, started)

    def recheck(self, evaluation: Evaluation) -> None:
        """Re-checks a candidate within a standard error of the target on fresh episodes; sets its confirmed return.

        It does nothing without `eval_confirm_episodes`.
        """
        if self.confirmation is None:
            return
        evaluation.record.update(confirm_episodes=self._config.eval_confirm_episodes, confirmed_return=None)
        candidate = self.best.is_candidate(evaluation.train_step, evaluation.average_return)
        near = self._target is None or evaluation.average_return >= self._target - evaluation.standard_error
        if not candidate or not near:
            return
        self.confirmation.load(evaluation.weights.variables)
        values = self.confirmation.run(confirmation_seed(self._config.seed, evaluation.train_step),
                                       self._stop_requested)
        if self._stop_requested():
            return
        if self.confirmation.whole_episodes:  # else every re-check episode ended in an env fault: no re-check
            evaluation.confirmed_return = evaluation.record["confirmed_return"] = values[AverageReturn.name]
        if self.confirmation.cut_short:
            evaluation.record["confirm_cut_short_episodes"] = self.confirmation.cut_short

    def offer_best(self, evaluation: Evaluation) -> None:
        """Offers the weights to the kept best policy (ranked by the confirmed return where there is one)."""
        try_write("best weights", self.best.offer, evaluation.train_step, evaluation.average_return,
                  evaluation.weights.variables, evaluation.confirmed_return)

    def maybe_request_reset(self, evaluation: Evaluation) -> None:
        """Asks the learner for a fresh Q-network if the run is stuck partway to its target (FallbackResetRule)."""
        if not self._reset_rule.observe(evaluation.train_step, evaluation.average_return,
                                        solved=self.best.reaches(self._target, self.confirmation is not None)):
            return
        log.info("train step %d: stuck partway to the target %.1f (every recent greedy average between %.1f "
                 "and %.1f, fallen back from this attempt's best or without a new best); asking the learner to "
                 "reset", evaluation.train_step, self._target, *self._reset_rule.fired_band)
        self._reset_requests.send(evaluation.train_step)
        evaluation.record["reset_requested"] = True

    def record(self, evaluation: Evaluation) -> None:
        """Writes the evaluation to TensorBoard (`eval/<metric>`) and evals.jsonl, and prints its line."""
        values = dict(evaluation.values)
        if evaluation.confirmed_return is not None:
            values["confirmed_return"] = evaluation.confirmed_return
        illegal = self.illegal_actions
        # A full run root costs these records (each failure counted and logged), never the evaluating.
        try_write("summaries", self._scalars.write, evaluation.train_step,
                  {**{f"eval/{name}": value for name, value in values.items()}, "eval/illegal_actions": illegal})
        try_write("summaries", self._writer.flush)
        try_write("progress file", write_progress, self._summary_dir, train_step=evaluation.train_step,
                  illegal_actions=illegal)
        evaluation.record.update(seconds=round(time.monotonic() - evaluation.started, 3), time=time.time())
        try_write("evals.jsonl", append_line, self._results_path, json.dumps(evaluation.record) + "\n")
        shown = " ".join(f"{name}={value:.1f}" for name, value in values.items())
        try_write("log line", print, f"eval train_step={evaluation.train_step} {shown}", flush=True)

    @property
    def illegal_actions(self) -> int:
        """Actions the observations' masks forbade in every evaluation and re-check so far (0 is right)."""
        return self.episodes.illegal_actions + (self.confirmation.illegal_actions if self.confirmation else 0)

    def close(self) -> None:
        """Stops pulling weights, exports the best policy and closes the envs."""
        self._puller.close()
        try_write("best policy export", self.best.export)
        if self.best.train_step is not None:
            log.info("best policy: train step %d, score %.1f, in %s", self.best.train_step, self.best.score,
                     self.best.export_dir)
            below = kept_below_random_play(self._summary_dir)
            if below:
                log.warning("%s", below)
        self.episodes.close()
        if self.confirmation is not None:
            self.confirmation.close()


def run(config: EvaluatorConfig) -> int:
    """Evaluates each newly published policy that is >= eval_interval steps past the last one."""
    use_one_core()
    stop = StopSignal()
    health = start_health(config, "evaluator")

    def stop_requested() -> bool:
        health.beat()  # the episodes ask between steps: an evaluation under way is a loop that runs
        return stop.requested

    evaluator = Evaluator.from_config(config, stop_requested)
    laps, evaluations = Laps("busy_s"), [0]
    reporter = RoleReporter(config.control_address_resolved(), config.rpc_timeout_s, "evaluator", "0",
                            lambda: {**laps.seconds, "evaluations": evaluations[0]}, config.report_interval_s,
                            config.machine_name)
    health.set(True)
    evaluator.measure_random_play()
    while not stop.wait(config.poll_interval_s):
        health.beat()
        weights = evaluator.new_weights()
        if weights is None:
            continue
        laps.start()
        evaluation = evaluator.evaluate(weights)
        if evaluation is None:  # stopped (the next wait ends the loop), or no whole episode to score
            continue
        evaluator.recheck(evaluation)
        laps.lap("busy_s")
        evaluations[0] += 1
        if stop.requested:
            break
        evaluator.offer_best(evaluation)
        evaluator.maybe_request_reset(evaluation)
        evaluator.record(evaluation)
    log.info("stopping (%s)", stop.signal_name)
    reporter.close()
    health.set(False)
    evaluator.close()
    health.stop()
    return 0
