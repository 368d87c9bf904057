"""Greedy-policy SavedModels: written so a reader never sees a half-written directory, and replayed on new episodes."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil

import numpy as np
from tf_agents.policies import policy_saver

from dqn.envs.making import EnvOptions
from dqn.files import replace_directory

log = logging.getLogger(__name__)


def export_policy(saver: policy_saver.PolicySaver, directory: str, step: int) -> None:
    """Saves the greedy policy as a SavedModel, replacing the previous export atomically.

    Pass the same `saver` every time: each new PolicySaver traces fresh functions that TF keeps for the life of
    the process, so a new saver per export would grow the learner's memory with every export.
    """
    tmp = f"{directory}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    saver.save(tmp)
    replace_directory(tmp, directory)  # a reader finds the old export or the new one, never none
    log.info("exported greedy policy of step %d to %s", step, directory)


def run_env_options(policy_dir: str) -> tuple[str | None, EnvOptions]:
    """(env id, evaluation env options) of the run that exported `policy_dir`, from the config.json beside it.

    A policy sees observations as its run's wrappers made them (Atari preprocessing, an observation history), so
    it is replayed on envs made the same way; without a config.json, the env id is unknown and the options default.
    """
    path = os.path.join(os.path.dirname(os.path.normpath(policy_dir)), "config.json")
    if not os.path.exists(path):
        return None, EnvOptions()
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    known = {field.name for field in dataclasses.fields(EnvOptions)}  # an older run's file may lack newer ones
    options = EnvOptions(**{name: value for name, value in config.items() if name in known})
    return config.get("env_id"), options.for_evaluation()


def play_exported_policy(policy_dir: str, env_id: str, episodes: int, seed: int,
                         options: EnvOptions | None = None) -> np.ndarray:
    """Returns of one episode per env (env i seeded `seed + i`) of the exported SavedModel policy in `policy_dir`.

    The evaluator judges a policy on the same start states every time; this plays it on others, so a solve that
    only fits those shows. A stateful (RNN) policy carries its state from step to step. `options`: how the run
    made its envs (`run_env_options`).
    """
    import tensorflow as tf
    from tf_agents.trajectories import time_step as ts

    from dqn.envs.vector_env import GymnasiumVectorEnvironment

    policy = tf.saved_model.load(policy_dir)
    env = GymnasiumVectorEnvironment(env_id, episodes, seed=seed, options=options)
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


def policy_check(policy_dir: str, env_id: str | None, episodes: int, seed: int) -> dict:
    """`play_exported_policy` summarised: episodes, seed, mean, median and minimum return.

    Envs are made as the exporting run made them (`run_env_options`); `env_id` None = the run's.
    """
    run_env_id, options = run_env_options(policy_dir)
    env_id = env_id or run_env_id
    if env_id is None:
        raise ValueError(f"no config.json beside {policy_dir} names the env: pass --env-id")
    returns = play_exported_policy(policy_dir, env_id, episodes, seed, options)
    return {"episodes": episodes, "seed": seed, "mean_return": round(float(returns.mean()), 1),
            "median_return": float(np.median(returns)), "min_return": float(returns.min())}
