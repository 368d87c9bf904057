"""Greedy-policy SavedModels: written so a reader never sees a half-written directory, and replayed on new episodes."""

from __future__ import annotations

import logging
import os
import shutil

import numpy as np
from tf_agents.policies import policy_saver

log = logging.getLogger(__name__)


def export_policy(saver: policy_saver.PolicySaver, directory: str, step: int) -> None:
    """Saves the greedy policy as a SavedModel, replacing the previous export atomically.

    Pass the same `saver` every time: each new PolicySaver traces fresh functions that TF keeps for the life of
    the process, so a new saver per export grows the learner's memory several times faster than a reused one
    (docs/performance.md, "Memory over long runs").
    """
    tmp = f"{directory}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    saver.save(tmp)
    old = f"{directory}.old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(directory):
        os.replace(directory, old)
    os.replace(tmp, directory)
    shutil.rmtree(old, ignore_errors=True)
    log.info("exported greedy policy of step %d to %s", step, directory)


def play_exported_policy(policy_dir: str, env_id: str, episodes: int, seed: int) -> np.ndarray:
    """Returns of one episode per env (env i seeded `seed + i`) of the exported SavedModel policy in `policy_dir`.

    The evaluator judges a policy on the same start states every time; this plays it on others, so a solve that
    only fits those shows. A stateful (RNN) policy carries its state from step to step.
    """
    import tensorflow as tf
    from tf_agents.trajectories import time_step as ts

    from dqn.envs.vector_env import GymnasiumVectorEnvironment

    policy = tf.saved_model.load(policy_dir)
    env = GymnasiumVectorEnvironment(env_id, episodes, seed=seed)
    step, state = env.reset(), policy.get_initial_state(episodes)
    returns = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    while running.any():
        policy_step = policy.action(tf.nest.map_structure(tf.constant, step), state)
        step, state = env.step(policy_step.action.numpy()), policy_step.state
        returns += np.where(running, step.reward, 0.0)
        running &= step.step_type != ts.StepType.LAST
    env.close()
    return returns


def policy_check(policy_dir: str, env_id: str, episodes: int, seed: int) -> dict:
    """`play_exported_policy` summarised: episodes, seed, mean, median and minimum return."""
    returns = play_exported_policy(policy_dir, env_id, episodes, seed)
    return {"episodes": episodes, "seed": seed, "mean_return": round(float(returns.mean()), 1),
            "median_return": float(np.median(returns)), "min_return": float(returns.min())}
