"""Whether an env has actions that change nothing: how `action_gap_alpha` auto decides.

In a grid room where pick up, drop, toggle and done leave an empty room exactly as it was and earn nothing, such
an idle action's value is the best action's value one step later. Where the reward comes only at the goal, the two
differ by (1 - gamma) of the state's value, 1 % at gamma 0.99: less than the Q-network's own error, so the greedy
policy may pick the idle action and stand still for good. Advantage learning with alpha 0.9 widens that gap to
(1 - gamma) / (1 - alpha) = 10 %. It also lowers every non-greedy action's target on envs without idle actions,
which slows their learning, so auto turns it on only where random play finds an idle action.

An action idles on a step that leaves the whole observation (every part of a nest) equal to the one before, earns a
reward of exactly 0 and does not end the episode. An env has idle actions when one of its actions idles on at least
IDLE_SHARE of its random-play steps. A wall that blocks a move now and then stays far below that share; a step cost
(-1 per step) or a penalty for the useless action already makes the gap wide, so those steps do not count.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dqn.envs.random_play import PlayedStep

#: The alpha auto gives an env with idle actions: their gap becomes (1 - gamma) / (1 - alpha) of the state's value.
IDLE_ALPHA = 0.9
#: Share of an action's random-play steps on which it must idle for the env to count as having idle actions.
IDLE_SHARE = 0.9
#: Steps each action needs in random play before the probe judges it: an action tried less is not called idle.
MIN_ACTION_STEPS = 20


class IdleActionCounts:
    """Per action, the random-play steps that tried it and the ones on which it idled."""

    def __init__(self):
        self.tried: dict[int | tuple, int] = {}
        self.idled: dict[int | tuple, int] = {}
        self._before = None  # the observation the next step starts from

    def see(self, step: PlayedStep) -> None:
        """Counts a step (a reset only sets the observation the next step starts from)."""
        if step.action is not None and not step.terminated:
            # One key per action: an index, or a vector of them (a branching layout's several dimensions).
            action = int(step.action) if np.ndim(step.action) == 0 else tuple(np.ravel(step.action).tolist())
            self.tried[action] = self.tried.get(action, 0) + 1
            idles = step.reward == 0 and same_observation(self._before, step.observation)
            self.idled[action] = self.idled.get(action, 0) + int(idles)
        self._before = step.observation

    def shares(self) -> dict[int, float]:
        """For each action tried at least MIN_ACTION_STEPS times: the share of its steps that idled."""
        return {action: self.idled[action] / count for action, count in sorted(self.tried.items())
                if count >= MIN_ACTION_STEPS}


def alpha_for(shares: dict[int, float]) -> float:
    """The alpha auto picks from each judged action's idle share."""
    return IDLE_ALPHA if any(share >= IDLE_SHARE for share in shares.values()) else 0.0


def action_gap_alpha_for(play: IdleActionCounts | None) -> tuple[float, str]:
    """(alpha, why) for auto from random play's idle counts; `play` None means random play failed."""
    if play is None:
        return 0.0, "random play failed"
    shares = play.shares()
    alpha = alpha_for(shares)
    if not shares:
        return alpha, f"random play tried no action {MIN_ACTION_STEPS} times"
    idle = sorted(action for action, share in shares.items() if share >= IDLE_SHARE)
    if idle:
        return alpha, (f"random play: action(s) {', '.join(map(str, idle))} change nothing and earn nothing on at "
                       f"least {100 * IDLE_SHARE:.0f}% of their steps; advantage learning keeps the greedy policy "
                       "from idling")
    return alpha, f"random play: no action idles on more than {100 * max(shares.values()):.0f}% of its steps"


def same_observation(first, second) -> bool:
    """Whether two observations (arrays or nests of them) are equal in every part."""
    first_parts, second_parts = tf.nest.flatten(first), tf.nest.flatten(second)
    return len(first_parts) == len(second_parts) and all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(first_parts, second_parts, strict=True))


def idle_shares(env_id: str, options, call_limit_s: float, seed: int) -> dict[int, float]:
    """The idle share of each judged action in one probe of its own (for measuring the rule on an env)."""
    from dqn.envs.random_play import probe_env

    counts = IdleActionCounts()
    probe_env(env_id, options, call_limit_s, seed, [counts])
    return counts.shares()
