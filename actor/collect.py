"""The actor process: N parallel envs, batched epsilon-greedy inference, 2-step items per env stream.

Loop: random warm-up steps, then the agent's collect policy on the whole batch of envs in one
`tf.function` call per step; weights are swapped in from the `WeightsPuller` without ever blocking.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from actor.writer import TrajectoryStreams
from dqn.agent import AgentBundle, build_agent, epsilon_at
from dqn.config import ActorConfig
from dqn.envs import GymnasiumVectorEnvironment
from dqn.health import start_health
from dqn.progress import EpisodeStats, write_progress
from dqn.replay import WeightsPuller, check_table_matches, wait_for_server
from dqn.runtime import StopSignal

log = logging.getLogger("actor")


def actor_epsilon(config: ActorConfig, train_step: int) -> float:
    """Epsilon of this actor: decayed schedule, or Ape-X's fixed per-actor ladder."""
    if not config.apex_epsilon:
        return epsilon_at(config, train_step)
    if config.num_actors == 1:
        return config.apex_base_epsilon
    return config.apex_base_epsilon ** (1 + 7 * config.actor_id / (config.num_actors - 1))


def make_batched_policy(bundle: AgentBundle):
    """One graph call chooses actions for all envs of this actor with the agent's collect policy."""
    policy = bundle.agent.collect_policy

    @tf.function(autograph=False)
    def act(step_type, reward, discount, observation):
        return policy.action(ts.TimeStep(step_type, reward, discount, observation)).action

    return lambda time_step: act(*time_step).numpy()


def run(config: ActorConfig) -> int:
    """Collects until stopped (SIGTERM/SIGINT) or `max_env_steps`; returns the exit code."""
    tf.config.threading.set_intra_op_parallelism_threads(1)  # many processes share few cores
    tf.config.threading.set_inter_op_parallelism_threads(1)
    stop = StopSignal()
    health = start_health(config.health_port, "actor")
    bundle = build_agent(config)
    client = wait_for_server(config.replay_address, wait_s=config.connect_timeout_s,
                             call_timeout_s=config.rpc_timeout_s)
    check_table_matches(client, bundle, config, role="actor")
    seed = config.seed + 10_000 * (config.actor_id + 1)
    env = GymnasiumVectorEnvironment(config.env_id, config.num_envs, seed=seed)
    streams = TrajectoryStreams(client, config.num_envs)
    act = make_batched_policy(bundle)
    puller = WeightsPuller(config.replay_address, config.rpc_timeout_s)
    summary_dir = config.path(f"actor-{config.actor_id}")
    writer = tf.summary.create_file_writer(summary_dir)
    rng = np.random.default_rng(seed)
    low, high = int(bundle.action_spec.minimum), int(bundle.action_spec.maximum)
    stats = EpisodeStats(config.num_envs)

    weights_step = -1
    policy_lag = 0
    env_steps = 0
    next_refresh = config.warmup_steps
    last_summary_time, last_summary_steps = time.monotonic(), 0
    waiting_since = None
    time_step = env.reset()
    health.set(True)
    log.info("actor %d: %d envs of %s, writing to %s", config.actor_id, config.num_envs, config.env_id,
             config.replay_address)
    while not stop.requested and not (config.max_env_steps and env_steps >= config.max_env_steps):
        warming_up = env_steps < config.warmup_steps
        if not warming_up and env_steps >= next_refresh:
            next_refresh = env_steps + config.weights_refresh_interval
            puller.request()
        weights = puller.latest() if not warming_up else None
        if weights is not None:
            for variable, value in zip(bundle.policy_variables, weights.variables, strict=True):
                variable.assign(value)
            policy_lag = max(0, weights.train_step - weights_step) if weights_step >= 0 else 0
            weights_step = weights.train_step
            bundle.epsilon.assign(actor_epsilon(config, weights_step))
        if not warming_up and weights_step < 0:
            # No weights yet: waiting is visible, never blocking (the puller polls in the background).
            if waiting_since is None or time.monotonic() - waiting_since > 10:
                log.info("warm-up done; waiting for first weights from the learner (%s)", puller.status)
                waiting_since = time.monotonic()
            stop.wait(0.2)
            continue
        if warming_up:
            action = rng.integers(low, high + 1, size=config.num_envs, dtype=np.int64)
        else:
            action = act(time_step)
        next_time_step = env.step(action)
        streams.append(time_step, action, next_time_step)
        stats.update(next_time_step)
        time_step = next_time_step
        env_steps += config.num_envs

        now = time.monotonic()
        if now - last_summary_time >= config.summary_interval_s:
            rate = (env_steps - last_summary_steps) / (now - last_summary_time)
            last_summary_time, last_summary_steps = now, env_steps
            with writer.as_default(step=env_steps):
                tf.summary.scalar("actor/env_steps_per_sec", rate)
                tf.summary.scalar("actor/epsilon", float(bundle.epsilon.numpy()) if not warming_up else 1.0)
                tf.summary.scalar("actor/weights_train_step", weights_step)
                tf.summary.scalar("actor/policy_lag_at_refresh", policy_lag)
                tf.summary.scalar("actor/episodes", stats.episodes)
                if stats.recent_returns:
                    tf.summary.scalar("actor/average_return", stats.average_return())
                    tf.summary.scalar("actor/average_episode_length", stats.average_length())
            write_progress(summary_dir, env_steps=env_steps, env_steps_per_sec=rate, episodes=stats.episodes,
                           weights_train_step=weights_step, items=streams.items_created)
    log.info("stopping after %d env steps (%s)", env_steps, stop.signal_name or "max_env_steps reached")
    health.set(False)
    streams.close(timeout_ms=int(config.rpc_timeout_s * 1000))
    puller.close()
    writer.flush()
    env.close()
    health.stop()
    return 0
