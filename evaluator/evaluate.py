"""The evaluator process: greedy-policy episodes whenever the published train step advances.

`eval_episodes` envs run side by side, one episode each, with the greedy policy in numpy for a plain MLP or
stepped inside the graph otherwise (evaluator/episodes.py; the episodes are independent, so this equals running
them one after another, only faster). Every
evaluation starts the same episodes (the same env seeds), so returns compare across train steps.

An evaluation whose average beats the kept best's score and reaches the target return (`target_return`, else the
env's reward_threshold; any new best when there is neither) is re-checked on `eval_confirm_episodes` fresh
episodes (new seeds each time) before its policy is kept (evaluator/best.py); `dqn-service local` counts a run as
solved only when both averages reach the target. The best of many noisy 10-episode averages overrates its policy,
and the policy a run hands out must hold on episodes that played no part in choosing it. Only candidates at the
target are re-checked because a re-check holds up the next evaluations: re-checking every improvement of an
improving policy left gaps of hundreds of train steps in which short-lived solving policies went unseen.
Episodes that an env fault cut short are left out of both averages (a partial return says nothing about the
policy), and a policy with no whole episode is not scored.

A run that came near its target and then fell back is reset (dqn/resets.py): the evaluator asks, through the
`learner_requests` table, and the learner starts a fresh Q-network (`fallback_reset_patience`).

Atari ids follow Nature DQN's evaluation protocol (Mnih et al. 2015, Methods): epsilon 0.05 and at most 5 minutes
of play (18,000 frames). A greedy policy that never presses FIRE in Breakout would otherwise wait out the
episode cap, and the first evaluations of a run would take minutes each.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time

import numpy as np
import tensorflow as tf

from dqn.builder import DqnBuilder
from dqn.envs.atari import is_atari
from dqn.envs.making import EnvOptions
from dqn.model.flat_weights import FlatWeights
from dqn.process.health import start_health
from dqn.process.runtime import StopSignal, use_one_core
from dqn.process.summaries import GraphScalars
from dqn.remote.replay_client import wait_for_server
from dqn.remote.reset_requests import ResetRequestSender
from dqn.remote.weights_puller import WeightsPuller
from dqn.settings.config import EvaluatorConfig, role_dir
from evaluator.best import BestPolicy
from evaluator.episodes import GreedyEpisodes, HostGreedyEpisodes, greedy_episodes
from evaluator.reset_rule import FallbackResetRule

log = logging.getLogger("evaluator")


#: Nature DQN's evaluation of Atari agents: epsilon 0.05, episodes of at most 5 minutes at 60 frames/s.
ATARI_EVAL_EPSILON = 0.05
ATARI_EVAL_FRAMES = 18_000


def evaluation_protocol(config: EvaluatorConfig) -> tuple[float, EnvOptions]:
    """(epsilon, env options) of evaluation episodes, with eval_epsilon / eval_max_episode_steps auto resolved."""
    atari = is_atari(config.env_id)
    epsilon = config.eval_epsilon
    if epsilon is None:
        epsilon = ATARI_EVAL_EPSILON if atari else 0.0
    options = EnvOptions.from_config(config)
    cap = config.eval_max_episode_steps
    if not cap and atari:  # Nature DQN's 5 minutes, or the training cap where that is shorter
        cap = min(filter(None, (ATARI_EVAL_FRAMES // config.atari_frame_skip, options.max_episode_steps)))
    if cap:
        options = dataclasses.replace(options, max_episode_steps=cap)
    return epsilon, options


def make_episodes(config: EvaluatorConfig, builder: DqnBuilder, num_episodes: int | None = None
                  ) -> GreedyEpisodes | HostGreedyEpisodes:
    """`num_episodes` (default eval_episodes) envs and a policy loop, built once and reused by every evaluation.

    Give it weights with `load(variables)` before `run`.
    """
    epsilon, options = evaluation_protocol(config)
    env = builder.make_envs(num_episodes or config.eval_episodes, options=options)
    cap = f"{options.max_episode_steps} agent steps" if options.max_episode_steps else "the env's own limit"
    if num_episodes is None:
        log.info("evaluation episodes: epsilon %g, at most %s", epsilon, cap)
    return greedy_episodes(builder.make_evaluation_policy(), builder.agent.action_spec, env, epsilon=epsilon)


def confirmation_seed(seed: int, train_step: int) -> int:
    """Env seeds of a re-check: new for every train step and apart from the evaluation's own episodes."""
    return int(np.random.SeedSequence([seed, train_step, 7]).generate_state(1)[0])


def run(config: EvaluatorConfig) -> int:
    """Evaluates each newly published policy that is >= eval_interval steps past the last one."""
    use_one_core()
    stop = StopSignal()
    health = start_health(config.health_port, "evaluator")
    builder = DqnBuilder(config)
    bundle = builder.agent
    client = wait_for_server(config.replay_address, wait_s=config.connect_timeout_s,
                             call_timeout_s=config.rpc_timeout_s)
    builder.check_server_tables(client, role="evaluator")
    episodes = make_episodes(config, builder)
    target = config.resolved_target_return(builder.reward_threshold)
    confirmation = make_episodes(config, builder, config.eval_confirm_episodes) if config.eval_confirm_episodes \
        else None
    log.info("greedy episodes run %s", "in numpy (plain MLP)" if isinstance(episodes, HostGreedyEpisodes)
             else "inside the graph")
    puller = WeightsPuller(config.replay_address, config.rpc_timeout_s)
    policy_weights = FlatWeights(bundle.policy_variables)
    summary_dir = config.path(role_dir("evaluator"))
    os.makedirs(summary_dir, exist_ok=True)
    writer = tf.summary.create_file_writer(summary_dir)
    scalars = GraphScalars(writer)
    results_path = os.path.join(summary_dir, "evals.jsonl")
    best = BestPolicy(summary_dir, bundle.agent.policy, policy_weights)
    reset_rule = FallbackResetRule(config.fallback_reset_patience, target)
    reset_requests = ResetRequestSender(client, config.replay_address, config.rpc_timeout_s)
    health.set(True)
    last_evaluated = None
    announced_wait = 0.0
    while not stop.wait(config.poll_interval_s):
        reset_requests.flush()
        puller.request()
        weights = puller.latest()
        if weights is None:
            if last_evaluated is None and time.monotonic() - announced_wait > 15:
                log.info("waiting for first weights from the learner (%s)", puller.status)
                announced_wait = time.monotonic()
            continue
        if last_evaluated is not None and weights.train_step < last_evaluated + config.eval_interval:
            continue
        episodes.load(weights.variables)
        started = time.monotonic()
        average_return, average_length = episodes.run(config.seed + 99_991, lambda: stop.requested)
        if stop.requested:
            break
        if math.isnan(average_return):  # no whole episode to score the policy on: wait for the next one
            log.warning("train step %d: every evaluation episode ended in an env fault; not scored",
                        weights.train_step)
            last_evaluated = weights.train_step
            continue
        scalars_now = {"eval/average_return": average_return, "eval/average_episode_length": average_length}
        record = {"train_step": weights.train_step, "average_return": average_return,
                  "average_episode_length": average_length, "episodes": config.eval_episodes - episodes.cut_short}
        if episodes.cut_short:
            record["cut_short_episodes"] = episodes.cut_short
        confirmed_return = None
        if confirmation is not None:
            record.update(confirm_episodes=config.eval_confirm_episodes, confirmed_return=None)
            if best.is_candidate(weights.train_step, average_return) and (target is None or average_return >= target):
                confirmation.load(weights.variables)
                confirmed_return, _ = confirmation.run(confirmation_seed(config.seed, weights.train_step),
                                                       lambda: stop.requested)
                if stop.requested:
                    break
                if math.isnan(confirmed_return):  # every re-check episode ended in an env fault: no re-check
                    confirmed_return = None
                else:
                    record["confirmed_return"] = scalars_now["eval/confirmed_return"] = confirmed_return
                if confirmation.cut_short:
                    record["confirm_cut_short_episodes"] = confirmation.cut_short
        last_evaluated = weights.train_step
        best.offer(weights.train_step, average_return, weights.variables, confirmed_return)
        if reset_rule.observe(weights.train_step, average_return, solved=best.reaches(target)):
            log.info("train step %d: stuck partway to the target %.1f (every recent greedy average between %.1f "
                     "and %.1f, fallen back from this attempt's best or without a new best); asking the learner to "
                     "reset", weights.train_step, target, *reset_rule.fired_band)
            reset_requests.send(weights.train_step)
            record["reset_requested"] = True
        scalars.write(weights.train_step, scalars_now)
        writer.flush()
        record.update(seconds=round(time.monotonic() - started, 3), time=time.time())
        with open(results_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        confirmed = "" if confirmed_return is None else f" confirmed_return={confirmed_return:.1f}"
        print(f"eval train_step={weights.train_step} average_return={average_return:.1f} "
              f"average_episode_length={average_length:.1f}{confirmed}", flush=True)
    log.info("stopping (%s)", stop.signal_name)
    health.set(False)
    puller.close()
    best.export()
    if best.train_step is not None:
        log.info("best policy: train step %d, score %.1f, in %s", best.train_step, best.score, best.export_dir)
    episodes.close()
    if confirmation is not None:
        confirmation.close()
    health.stop()
    return 0
