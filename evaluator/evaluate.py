"""The evaluator process: greedy-policy episodes whenever the published train step advances.

`eval_episodes` envs run side by side, one episode each, with one batched greedy-policy call per
step (the episodes are independent, so this equals running them one after another, only faster).
"""

from __future__ import annotations

import json
import logging
import os
import time

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.agent import batched_actions, build_agent
from dqn.config import EvaluatorConfig
from dqn.envs import EnvOptions, GymnasiumVectorEnvironment
from dqn.health import start_health
from dqn.replay import check_table_matches, wait_for_server
from dqn.runtime import StopSignal
from dqn.weights import WeightsPuller

log = logging.getLogger("evaluator")



def evaluate(config: EvaluatorConfig, act, seed: int, stop: StopSignal) -> tuple[float, float]:
    """(average return, average length) over `eval_episodes` greedy episodes (one per env)."""
    env = GymnasiumVectorEnvironment(config.env_id, config.eval_episodes, seed=seed,
                                     options=EnvOptions.from_config(config))
    try:
        time_step = env.reset()
        returns = np.zeros(config.eval_episodes)
        lengths = np.zeros(config.eval_episodes, dtype=np.int64)
        running = np.ones(config.eval_episodes, dtype=bool)
        while running.any() and not stop.requested:
            time_step = env.step(act(time_step))
            returns[running] += time_step.reward[running]
            lengths[running] += 1
            running &= time_step.step_type != ts.StepType.LAST
        return float(returns.mean()), float(lengths.mean())
    finally:
        env.close()


def run(config: EvaluatorConfig) -> int:
    """Evaluates each newly published policy that is >= eval_interval steps past the last one."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    stop = StopSignal()
    health = start_health(config.health_port, "evaluator")
    bundle = build_agent(config)
    client = wait_for_server(config.replay_address, wait_s=config.connect_timeout_s,
                             call_timeout_s=config.rpc_timeout_s)
    check_table_matches(client, bundle, config, role="evaluator")
    act = batched_actions(bundle.agent.policy, config.eval_episodes)
    puller = WeightsPuller(config.replay_address, config.rpc_timeout_s)
    summary_dir = config.path("evaluator")
    os.makedirs(summary_dir, exist_ok=True)
    writer = tf.summary.create_file_writer(summary_dir)
    results_path = os.path.join(summary_dir, "evals.jsonl")
    health.set(True)
    last_evaluated = None
    announced_wait = 0.0
    while not stop.wait(config.poll_interval_s):
        puller.request()
        weights = puller.latest()
        if weights is None:
            if last_evaluated is None and time.monotonic() - announced_wait > 15:
                log.info("waiting for first weights from the learner (%s)", puller.status)
                announced_wait = time.monotonic()
            continue
        if last_evaluated is not None and weights.train_step < last_evaluated + config.eval_interval:
            continue
        for variable, value in zip(bundle.policy_variables, weights.variables, strict=True):
            variable.assign(value)
        started = time.monotonic()
        average_return, average_length = evaluate(config, act, config.seed + 99_991, stop)
        if stop.requested:
            break
        last_evaluated = weights.train_step
        with writer.as_default(step=weights.train_step):
            tf.summary.scalar("eval/average_return", average_return)
            tf.summary.scalar("eval/average_episode_length", average_length)
        writer.flush()
        record = {"train_step": weights.train_step, "average_return": average_return,
                  "average_episode_length": average_length, "episodes": config.eval_episodes,
                  "seconds": round(time.monotonic() - started, 3), "time": time.time()}
        with open(results_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        print(f"eval train_step={weights.train_step} average_return={average_return:.1f} "
              f"average_episode_length={average_length:.1f}", flush=True)
    log.info("stopping (%s)", stop.signal_name)
    health.set(False)
    puller.close()
    health.stop()
    return 0
