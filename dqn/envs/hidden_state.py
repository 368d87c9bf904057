"""Whether an env's vector observation leaves out part of its state: how `observation_history` auto decides.

A cart-pole observed by positions only is not Markov: where the pole goes next depends on its velocity, which one
observation does not hold and the previous one reveals. A feed-forward Q-network cannot act well on such an input
(it stays near a quarter of the best return there), and two observations side by side fix it. Stacking them on a
fully observed env only costs: the classic-control and Box2D envs learn later with a history of 2.

So auto asks the env. A few thousand steps of seeded random play give transitions (previous observation,
observation, action -> next observation); two ridge regressions predict the change of the observation, one from the
observation and the action (linear and pairwise-product features, which fit the smooth dynamics of simulated
bodies), one from those plus the previous observation. Each is scored on held-out transitions by the share of the
change's variance it leaves unexplained. Where the previous observation explains at least HIDDEN_STATE_GAIN of it
on average, the observation misses part of the state and auto gives a history of 2; otherwise 1, the current
observation alone. Noise the env adds fresh at each step is explained by neither, so it does not trigger a history.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np

from dqn.envs.making import EnvOptions, env_specs
from dqn.envs.random_play import random_play

log = logging.getLogger(__name__)

#: The history auto gives an env whose observation misses part of its state (two observations hold a velocity).
HIDDEN_STATE_HISTORY = 2
#: Share of the next change's variance the previous observation must explain on top of the current one, on average
#: over the observation's features. Measured (bench/hidden_state.py): fully observed classic-control, Box2D and
#: game-feature envs at most 0.01, popgym's noisy position-only cart-pole 0.04-0.08, position-only cart-poles 0.35-0.67.
HIDDEN_STATE_GAIN = 0.2
#: Random-play steps and seconds the probe spends at most; it stops at whichever comes first.
PROBE_STEPS = 3000
PROBE_BUDGET_S = 2.0
#: Observation features plus actions the pairwise-product regression takes at most (560 features at 32).
MAX_PROBE_INPUTS = 32
#: Transitions below which the probe says nothing (a slow env within the budget): auto then keeps 1.
MIN_TRANSITIONS = 300


def resolve_observation_history(config):
    """`config` with `observation_history` auto (None) decided for its env; an explicit value is kept.

    Seeded random play (`config.seed`) makes every role that decides for the same env decide alike; `local`
    decides once, before its roles start, and hands them the answer.
    """
    if config.observation_history is not None:
        return config
    history = auto_observation_history(config.env_id, EnvOptions.from_config(config, observation_history=1),
                                       config.env_call_timeout_s, config.seed)
    return dataclasses.replace(config, observation_history=history)


def auto_observation_history(env_id: str, options: EnvOptions, call_limit_s: float, seed: int) -> int:
    """HIDDEN_STATE_HISTORY where random play shows a vector observation missing part of the state, else 1."""
    observation, action, _ = env_specs(env_id, options)
    if isinstance(observation, dict | tuple | list) or len(observation.shape) != 1:
        return 1  # images carry their own history (Atari's frame stack); nests and grids are left alone
    num_actions = int(action.maximum) - int(action.minimum) + 1
    if observation.shape[0] + num_actions > MAX_PROBE_INPUTS:
        log.info("observation_history auto: 1 (%d features and %d actions are more than the probe fits)",
                 observation.shape[0], num_actions)
        return 1
    try:
        transitions = played_transitions(env_id, options, call_limit_s, seed)
    except Exception as error:  # noqa: BLE001 - the user's env; the actors report its faults where they matter
        log.warning("observation_history auto: random play failed (%s: %s); using 1", type(error).__name__, error)
        return 1
    if transitions is None or len(transitions[0]) < MIN_TRANSITIONS:
        log.info("observation_history auto: 1 (random play gives fewer than %d transitions within %g s)",
                 MIN_TRANSITIONS, PROBE_BUDGET_S)
        return 1
    without, with_previous = unexplained_change(*transitions, num_actions=num_actions,
                                                action_minimum=int(action.minimum))
    history = history_for(without, with_previous)
    log.info("observation_history auto: %d (random play: the observation and action leave %.0f%% of the next "
             "change unexplained, %.0f%% with the previous observation too; a drop of %.0f points or more means "
             "part of the state is hidden)", history, 100 * without, 100 * with_previous, 100 * HIDDEN_STATE_GAIN)
    return history


def history_for(without: float, with_previous: float) -> int:
    """The history auto picks from the unexplained shares without and with the previous observation."""
    return HIDDEN_STATE_HISTORY if without - with_previous >= HIDDEN_STATE_GAIN else 1


def played_transitions(env_id: str, options: EnvOptions, call_limit_s: float, seed: int
                       ) -> tuple[np.ndarray, ...] | None:
    """(previous, current, action, next) arrays of random play's steps that have a previous step in their episode."""
    previous, current, actions, following = [], [], [], []
    episode: list = []  # this episode's observations so far
    play = random_play(env_id, options, call_limit_s, seed, PROBE_BUDGET_S, PROBE_STEPS)
    started = None  # from the first reset: making the env can take long in a simulator whose steps are quick
    try:
        for step in play:
            started = started or time.perf_counter()
            elapsed = time.perf_counter() - started
            if elapsed > PROBE_BUDGET_S / 8 and len(current) * PROBE_BUDGET_S / elapsed < MIN_TRANSITIONS:
                return None  # a slow env: the budget would end short of enough transitions, so stop now
            if step.action is None:  # a reset starts a new episode
                episode = [step.observation]
                continue
            if len(episode) >= 2:
                previous.append(episode[-2])
                current.append(episode[-1])
                actions.append(step.action)
                following.append(step.observation)
            episode.append(step.observation)
            del episode[:-2]
    finally:
        play.close()
    if not current:
        return None
    arrays = tuple(np.asarray(rows, dtype=np.float64) for rows in (previous, current, actions, following))
    finite = np.all([np.isfinite(a.reshape(len(a), -1)).all(axis=1) for a in arrays], axis=0)
    return tuple(a[finite] for a in arrays)


def unexplained_change(previous: np.ndarray, current: np.ndarray, actions: np.ndarray, following: np.ndarray,
                       num_actions: int, action_minimum: int = 0) -> tuple[float, float]:
    """Shares of the change `following - current` left unexplained without and with the previous observation.

    Each is the mean over features of the held-out unexplained variance share, in [0, 1]: where they differ, the
    previous observation holds something about the next one that the current observation and the action do not.
    """
    mean, scale = current.mean(axis=0), current.std(axis=0) + 1e-8
    now, before = (current - mean) / scale, (previous - mean) / scale
    one_hot = np.eye(num_actions)[actions.astype(int) - action_minimum]
    base = pairwise_features(np.hstack([now, one_hot]))
    change = following - current
    split = len(change) * 2 // 3  # fit on the first two thirds of the play, score on the rest
    without = unexplained_shares(base, change, split)
    with_previous = unexplained_shares(np.hstack([base, before]), change, split)
    if without.size == 0:
        return 0.0, 0.0  # the observation never changes: nothing to predict
    return float(np.mean(without)), float(np.mean(with_previous))


def pairwise_features(inputs: np.ndarray) -> np.ndarray:
    """The inputs, their pairwise products and squares, and a constant."""
    rows, cols = np.triu_indices(inputs.shape[1])
    return np.hstack([inputs, inputs[:, rows] * inputs[:, cols], np.ones((len(inputs), 1))])


def unexplained_shares(features: np.ndarray, targets: np.ndarray, split: int) -> np.ndarray:
    """Per varying target column, the share of its held-out variance a ridge fit on rows [:split] leaves, in [0, 1]."""
    fit_x, fit_y, test_x, test_y = features[:split], targets[:split], features[split:], targets[split:]
    # A little ridge keeps products of rare features (a contact flag) from blowing up on held-out rows.
    gram = fit_x.T @ fit_x + 1e-6 * len(fit_x) * np.eye(fit_x.shape[1])
    weights = np.linalg.solve(gram, fit_x.T @ fit_y)
    variance = test_y.var(axis=0)
    varies = variance > 1e-12 * (1.0 + np.abs(test_y).max(axis=0) ** 2)
    residual = (test_y - test_x @ weights).var(axis=0)
    return np.clip(residual[varies] / variance[varies], 0.0, 1.0)
