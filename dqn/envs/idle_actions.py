"""Whether an env has actions that change nothing: how `action_gap_alpha` auto decides.

In MiniGrid's rooms four of the seven actions (pick up, drop, toggle, done) leave an empty room exactly as it was and
earn nothing. Where the reward comes only at the goal, such an idle action's value is the best action's value one
step later: at gamma 0.99 the two differ by 1 % of the state's value, less than the Q-network's error, and the greedy
policy stands still forever (0.20 and 0.49 of the best return where SB3 reaches 0.97). Advantage learning with
alpha 0.9 widens that gap to (1 - gamma) / (1 - alpha) = 10 % and learns the room within 60 s; on envs without idle
actions it only slows learning (LunarLander solves later), so auto turns it on where random play finds one.

An action idles on a step that leaves the whole observation (every part of a nest) equal to the one before, earns a
reward of exactly 0 and does not end the episode. An env has idle actions when one of its actions idles on at least
IDLE_SHARE of its random-play steps. A wall that blocks a move now and then stays far below that share; a step cost
(-1 per step) or a penalty for the useless action already makes the gap wide, so those steps do not count.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from dqn.envs.making import EnvOptions
from dqn.envs.random_play import random_play

log = logging.getLogger(__name__)

#: The alpha auto gives an env with idle actions: their gap becomes (1 - gamma) / (1 - alpha) of the state's value.
IDLE_ALPHA = 0.9
#: Share of an action's random-play steps on which it must idle for the env to count as having idle actions.
IDLE_SHARE = 0.9
#: Random-play steps and seconds the probe spends at most; it stops at whichever comes first.
PROBE_STEPS = 2000
PROBE_BUDGET_S = 1.0
#: Steps each action needs in random play before the probe judges it: an action tried less is not called idle.
MIN_ACTION_STEPS = 20


def resolve_action_gap_alpha(config):
    """`config` with `action_gap_alpha` auto (None) decided for its env; an explicit value is kept.

    Only the learner's targets depend on it; `local` decides once before its roles start and hands it on, and a
    learner started apart decides from the same seeded play.
    """
    if config.action_gap_alpha is not None:
        return config
    options = EnvOptions.from_config(config, observation_history=1)  # idling shows in one observation
    alpha = auto_action_gap_alpha(config.env_id, options, config.env_call_timeout_s, config.seed)
    return dataclasses.replace(config, action_gap_alpha=alpha)


def auto_action_gap_alpha(env_id: str, options: EnvOptions, call_limit_s: float, seed: int) -> float:
    """IDLE_ALPHA where random play shows an action that mostly changes nothing and earns nothing, else 0."""
    try:
        shares = idle_shares(env_id, options, call_limit_s, seed)
    except Exception as error:  # noqa: BLE001 - the user's env; the actors report its faults where they matter
        log.warning("action_gap_alpha auto: random play failed (%s: %s); using 0", type(error).__name__, error)
        return 0.0
    idle = sorted(action for action, share in shares.items() if share >= IDLE_SHARE)
    alpha = alpha_for(shares)
    if not shares:
        log.info("action_gap_alpha auto: 0 (random play tried no action %d times within %g s)", MIN_ACTION_STEPS,
                 PROBE_BUDGET_S)
    elif idle:
        log.info("action_gap_alpha auto: %g (random play: action(s) %s change nothing and earn nothing on at least "
                 "%.0f%% of their steps; advantage learning keeps the greedy policy from idling)", alpha,
                 ", ".join(map(str, idle)), 100 * IDLE_SHARE)
    else:
        log.info("action_gap_alpha auto: 0 (random play: no action idles on more than %.0f%% of its steps)",
                 100 * max(shares.values()))
    return alpha


def alpha_for(shares: dict[int, float]) -> float:
    """The alpha auto picks from each judged action's idle share."""
    return IDLE_ALPHA if any(share >= IDLE_SHARE for share in shares.values()) else 0.0


def idle_shares(env_id: str, options: EnvOptions, call_limit_s: float, seed: int) -> dict[int, float]:
    """For each action random play tried at least MIN_ACTION_STEPS times: the share of its steps that idled."""
    tried: dict[int, int] = {}
    idled: dict[int, int] = {}
    before = None  # the observation the next step starts from
    play = random_play(env_id, options, call_limit_s, seed, PROBE_BUDGET_S, PROBE_STEPS)
    try:
        for step in play:
            if step.action is not None and not step.terminated:
                action = int(step.action)
                tried[action] = tried.get(action, 0) + 1
                idles = step.reward == 0 and same_observation(before, step.observation)
                idled[action] = idled.get(action, 0) + int(idles)
            before = step.observation
    finally:
        play.close()
    return {action: idled[action] / count for action, count in sorted(tried.items()) if count >= MIN_ACTION_STEPS}


def same_observation(first, second) -> bool:
    """Whether two observations (arrays or nests of them) are equal in every part."""
    first_parts, second_parts = tf.nest.flatten(first), tf.nest.flatten(second)
    return len(first_parts) == len(second_parts) and all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(first_parts, second_parts, strict=True))
