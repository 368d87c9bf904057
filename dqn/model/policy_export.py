"""Greedy-policy SavedModels: written so a reader never sees a half-written directory, and replayed on new episodes.

An exported policy takes the observation the service sees (with its mask of valid actions, dqn/envs/action_masks.py)
and returns the env's own actions: a multi-discrete run's policy is wrapped in `EnvActionsPolicy`, which turns the
service's action (a flat index or a vector of 0-based indices) into the env's array or tuple.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil

import numpy as np
import tensorflow as tf
from tf_agents.policies import policy_saver, tf_policy
from tf_agents.specs import tensor_spec

from dqn.envs.action_spaces import ActionForm
from dqn.envs.making import EnvOptions
from dqn.files import replace_directory

log = logging.getLogger(__name__)


def env_action_spec(form: ActionForm):
    """The TF spec of the env's own actions: int64 [*shape] from each start, or a tuple of int64 scalars."""
    low, high = np.asarray(form.start, np.int64), np.asarray(form.start, np.int64) + np.asarray(form.nvec) - 1
    if form.kind == "tuple":
        return tuple(tensor_spec.BoundedTensorSpec((), tf.int64, int(lo), int(hi)) for lo, hi in zip(low, high,
                                                                                                      strict=True))
    return tensor_spec.BoundedTensorSpec(form.shape, tf.int64, low.reshape(form.shape), high.reshape(form.shape))


class EnvActionsPolicy(tf_policy.TFPolicy):
    """`policy` with its actions in the env's own form (`form`): what a multi-discrete run exports."""

    def __init__(self, policy, form: ActionForm):
        super().__init__(policy.time_step_spec, env_action_spec(form), policy.policy_state_spec, clip=False)
        self._policy = policy
        self._form = form

    def _variables(self):
        return self._policy.variables()

    def _action(self, time_step, policy_state, seed):
        step = self._policy.action(time_step, policy_state)
        return step._replace(action=self._form.env_actions_tf(step.action))

    def _distribution(self, time_step, policy_state):
        raise NotImplementedError("the env's own actions are given by `action`")


def export_form(policy, form: ActionForm):
    """The policy to export: `policy` itself for a Discrete env, else wrapped to return the env's own actions."""
    return policy if form.layout == "single" else EnvActionsPolicy(policy, form)


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
                         options: EnvOptions | None = None) -> tuple[np.ndarray, int]:
    """(returns of one episode per env (env i seeded `seed + i`), actions its mask forbade) of the exported policy.

    The evaluator judges a policy on the same start states every time; this plays it on others, so a solve that
    only fits those shows. A stateful (RNN) policy carries its state from step to step. `options`: how the run
    made its envs (`run_env_options`). The policy's actions are the env's own; each is checked against the mask
    of the observation it was chosen for, where the run reads one.
    """
    from tf_agents.trajectories import time_step as ts

    from dqn.envs.vector_env import GymnasiumVectorEnvironment
    from dqn.model.actions import ValidActions

    policy = tf.saved_model.load(policy_dir)
    env = GymnasiumVectorEnvironment(env_id, episodes, seed=seed, options=options)
    options = options or EnvOptions()
    valid = ValidActions.of(env.observation_spec(), env.action_spec(),
                            None if options.action_mask == "none" else options.action_mask_key)
    form = env.action_form
    step, state = env.reset(), policy.get_initial_state(episodes)
    returns = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    illegal = 0
    while running.any():
        policy_step = policy.action(tf.nest.map_structure(tf.constant, step), state)
        actions = tf.nest.map_structure(lambda action: action.numpy(), policy_step.action)
        actions = actions if form.layout == "single" else form.service_actions(actions)
        illegal += valid.illegal(actions, valid.mask(step.observation))
        step, state = env.step(actions), policy_step.state
        returns += np.where(running, step.reward, 0.0)
        running &= step.step_type != ts.StepType.LAST
    env.close()
    return returns, illegal


def policy_check(policy_dir: str, env_id: str | None, episodes: int, seed: int) -> dict:
    """`play_exported_policy` summarised: episodes, seed, mean, median and minimum return, illegal actions.

    Envs are made as the exporting run made them (`run_env_options`); `env_id` None = the run's.
    """
    run_env_id, options = run_env_options(policy_dir)
    env_id = env_id or run_env_id
    if env_id is None:
        raise ValueError(f"no config.json beside {policy_dir} names the env: pass --env-id")
    returns, illegal = play_exported_policy(policy_dir, env_id, episodes, seed, options)
    return {"episodes": episodes, "seed": seed, "mean_return": round(float(returns.mean()), 1),
            "median_return": float(np.median(returns)), "min_return": float(returns.min()), "illegal_actions": illegal}
