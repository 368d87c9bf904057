"""Whether an env's vector observation leaves out part of its state: how `observation_history` auto decides.

A cart-pole observed by positions only is not Markov: where the pole goes next depends on its velocity, which one
observation does not hold and the previous one reveals. A feed-forward Q-network cannot act well on such an input,
and two observations side by side fix it. Stacking them on a fully observed env only costs (a larger input, more
to learn), so auto asks the env.

Random play gives transitions (previous observation, observation, action -> next observation); two ridge
regressions predict the change of the observation, one from the observation and the action (linear and
pairwise-product features, which fit the smooth dynamics of simulated bodies), one from those plus the previous
observation. Each is scored on held-out transitions by the share of the change's variance it leaves unexplained.
Where the previous observation explains at least HIDDEN_STATE_GAIN of it on average, the observation misses part
of the state and auto gives a history of 2; otherwise 1, the current observation alone. Noise the env adds fresh
at each step is explained by neither, so it does not trigger a history.
"""

from __future__ import annotations

import numpy as np

from dqn.envs.random_play import PlayedStep

#: The history auto gives an env whose observation misses part of its state (two observations hold a velocity).
HIDDEN_STATE_HISTORY = 2
#: Share of the next change's variance the previous observation must explain on top of the current one, on average
#: over the observation's features: well above what fresh noise and regression error leave on fully observed
#: envs, well below what a hidden velocity leaves.
HIDDEN_STATE_GAIN = 0.2
#: Observation features plus actions the pairwise-product regression takes at most (560 features at 32).
MAX_PROBE_INPUTS = 32
#: Transitions below which the probe says nothing (a slow env within the budget): auto then keeps 1.
MIN_TRANSITIONS = 300


def probed_inputs(observation_spec, action_spec) -> str | None:
    """Why the probe cannot judge this env's observation (then auto keeps 1), or None if it can."""
    if isinstance(observation_spec, dict | tuple | list) or len(observation_spec.shape) != 1:
        return "not a vector observation"  # images carry their own history (Atari's frame stack); nests are left
    num_actions = int(action_spec.maximum) - int(action_spec.minimum) + 1
    if observation_spec.shape[0] + num_actions > MAX_PROBE_INPUTS:
        return f"{observation_spec.shape[0]} features and {num_actions} actions are more than the probe fits"
    return None


class PlayedTransitions:
    """Random play's steps that have a previous step in their episode: (previous, current, action, next)."""

    def __init__(self):
        self.previous, self.current, self.actions, self.following = [], [], [], []
        self._episode: list = []  # this episode's last two observations

    def see(self, step: PlayedStep) -> None:
        """Keeps a step as a transition once its episode has a previous observation; a reset starts anew."""
        if step.action is None:
            self._episode = [step.observation]
            return
        if len(self._episode) >= 2:
            self.previous.append(self._episode[-2])
            self.current.append(self._episode[-1])
            self.actions.append(step.action)
            self.following.append(step.observation)
        self._episode.append(step.observation)
        del self._episode[:-2]

    def arrays(self) -> tuple[np.ndarray, ...] | None:
        """(previous, current, action, next) as float arrays, rows with a non-finite value dropped; None if empty."""
        if not self.current:
            return None
        arrays = tuple(np.asarray(rows, dtype=np.float64)
                       for rows in (self.previous, self.current, self.actions, self.following))
        finite = np.all([np.isfinite(a.reshape(len(a), -1)).all(axis=1) for a in arrays], axis=0)
        return tuple(a[finite] for a in arrays)


def observation_history_for(observation_spec, action_spec, play: PlayedTransitions | None) -> tuple[int, str]:
    """(history, why) for auto: HIDDEN_STATE_HISTORY where random play shows the observation hides state, else 1.

    `play` None means random play failed or was not watched (`probed_inputs` said why).
    """
    if (reason := probed_inputs(observation_spec, action_spec)) is not None:
        return 1, reason
    if play is None:
        return 1, "random play failed"
    transitions = play.arrays()
    if transitions is None or len(transitions[0]) < MIN_TRANSITIONS:
        return 1, f"random play gave fewer than {MIN_TRANSITIONS} transitions"
    without, with_previous = unexplained_change(*transitions, num_actions=int(action_spec.maximum) -
                                                int(action_spec.minimum) + 1, action_minimum=int(action_spec.minimum))
    return history_for(without, with_previous), (
        f"random play: the observation and action leave {100 * without:.0f}% of the next change unexplained, "
        f"{100 * with_previous:.0f}% with the previous observation too; a drop of {100 * HIDDEN_STATE_GAIN:.0f} "
        "points or more means part of the state is hidden")


def history_for(without: float, with_previous: float) -> int:
    """The history auto picks from the unexplained shares without and with the previous observation."""
    return HIDDEN_STATE_HISTORY if without - with_previous >= HIDDEN_STATE_GAIN else 1


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


def played_transitions(env_id: str, options, call_limit_s: float, seed: int) -> tuple[np.ndarray, ...] | None:
    """The transitions of one probe of its own (for measuring the rule on an env); see `PlayedTransitions.arrays`."""
    from dqn.envs.random_play import probe_env

    transitions = PlayedTransitions()
    probe_env(env_id, options, call_limit_s, seed, [transitions])
    return transitions.arrays()
