"""Temporally extended epsilon-greedy: a random action, once drawn, is held for a heavy-tailed number of steps.

Plain epsilon-greedy dithers: one random step at a time, which a greedy policy undoes at once, so states that need
many consistent random steps to reach (a car rocking up a hill, a far corner of a maze) are almost never seen.
Holding each random action for n ~ zeta(exponent) steps (Dabney, Ostrovski and Barreto, "Temporally-Extended
epsilon-Greedy Exploration", ICLR 2021) keeps most holds at one or two steps, while the heavy tail now and then
commits to one action long enough to get somewhere new.

Two choices differ from the paper. There epsilon is the chance of starting a hold, so the share of random steps grows
to about epsilon times the mean hold; here holds start just often enough that the share of random steps is epsilon,
so the epsilon schedule keeps its meaning and only the arrangement of random steps changes. And a hold ends with its
episode: carried into the next one, a long hold plays whole episodes of one action (dozens of CartPole episodes in a
row), which teach nothing that its first one did not, and takes the random steps that would otherwise start holds
elsewhere. With holds cut at episode ends the mean hold depends on the env's episode lengths, so the start
probability follows a running mean of the lengths the holds actually had.
"""

from __future__ import annotations

import numpy as np

from dqn.model.actions import random_actions

#: Longest hold; it only caps the zeta tail (the paper's 10,000).
MAX_HOLD_STEPS = 10_000
#: Weight of each finished hold in the running mean of hold lengths: about the last thousand holds count.
HOLD_MEAN_RATE = 1e-3


def mean_hold_steps(exponent: float) -> float:
    """Expected hold length under zeta(exponent) capped at MAX_HOLD_STEPS (exponent > 1)."""
    lengths = np.arange(1, MAX_HOLD_STEPS + 1, dtype=np.float64)
    weights = lengths ** -exponent
    # zeta(exponent): the capped sum plus its tail, whose integral approximation is exact enough here.
    zeta = weights.sum() + MAX_HOLD_STEPS ** (1 - exponent) / (exponent - 1)
    beyond_cap = 1.0 - weights.sum() / zeta
    return float((lengths * weights).sum() / zeta + MAX_HOLD_STEPS * beyond_cap)


def hold_start_probability(epsilon: float, mean_hold: float) -> float:
    """The chance that an env not holding starts a hold, so that the long-run share of random steps is epsilon.

    A cycle is (1 - p) / p greedy steps, then one hold of mean m: the random share p m / (1 + p (m - 1)) equals
    epsilon at p = epsilon / (m - epsilon (m - 1)); 1 at epsilon 1, 0 at epsilon 0.
    """
    return epsilon / (mean_hold - epsilon * (mean_hold - 1.0))


class HeldRandomActions:
    """Per env: the held random action while a hold runs, else maybe start one, else the greedy action.

    Holds start with `hold_start_probability` of the running mean hold, so the share of random steps is epsilon.
    A hold ends after its drawn length or at its episode's end; an env's hold is the only state kept between steps.
    """

    def __init__(self, num_envs: int, minimum: int, maximum: int, exponent: float, seed: int,
                 action_shape: tuple[int, ...] = ()):
        if exponent <= 1:
            raise ValueError(f"hold exponent must be > 1, got {exponent}")
        self._minimum, self._num_actions, self._exponent = minimum, maximum - minimum + 1, exponent
        self._action_shape = tuple(action_shape)  # a branching layout's D dimensions, each from minimum..maximum
        # Until holds have finished, the uncut mean: an overestimate, so the random share starts at most epsilon.
        self.mean_hold = mean_hold_steps(exponent)
        self._rng = np.random.default_rng(seed)
        self._steps_left = np.zeros(num_envs, np.int64)
        #: [N] bool: the envs whose action in the last `actions` call was random (a hold's).
        self.holding = np.zeros(num_envs, bool)
        self._steps_taken = np.zeros(num_envs, np.int64)
        self._held = np.zeros((num_envs, *self._action_shape), np.int64)

    @property
    def num_envs(self) -> int:
        """Envs these holds act for."""
        return len(self._steps_left)

    def actions(self, greedy_actions: np.ndarray, epsilon: float,
                episode_starts: np.ndarray | None = None, mask: np.ndarray | None = None,
                force_starts: np.ndarray | None = None) -> np.ndarray:
        """The envs' actions this step: a held random action where one is running, else the greedy one.

        `episode_starts` marks the envs whose current step begins an episode: their holds end there.
        `force_starts` marks envs that start a hold now if none runs, on top of those epsilon starts. Held actions
        are drawn by `dqn.model.actions` among the valid ones of `mask` [N, ...] (None: all). A hold whose action
        the mask now forbids goes on with a fresh valid one: the hold keeps its length, so the random share stays
        epsilon, and no invalid action is ever taken.
        """
        if episode_starts is not None:
            cut = episode_starts & (self._steps_left > 0)
            self._finish(cut)
        start_probability = hold_start_probability(epsilon, self.mean_hold)
        drawn = self._rng.random(len(self._steps_left)) < start_probability
        if force_starts is not None:
            drawn |= force_starts
        starts = (self._steps_left <= 0) & drawn
        count = int(starts.sum())
        if count:
            self._held[starts] = self._draw(count, None if mask is None else mask[starts])
            self._steps_left[starts] = np.minimum(self._rng.zipf(self._exponent, count), MAX_HOLD_STEPS)
            self._steps_taken[starts] = 0
        holding = self._steps_left > 0
        self.holding = holding
        if mask is not None:
            self._redraw_forbidden(holding, mask)
        self._steps_left[holding] -= 1
        self._steps_taken[holding] += 1
        self._finish(holding & (self._steps_left == 0))
        rows = holding.reshape(-1, *(1 for _ in self._action_shape))
        return np.where(rows, self._held, greedy_actions).astype(greedy_actions.dtype)

    def _draw(self, count: int, mask: np.ndarray | None) -> np.ndarray:
        """`count` uniform random actions among the valid ones of `mask` (unmasked: one `integers` call, as always)."""
        size = (count, *self._action_shape) if self._action_shape else count
        return random_actions(self._rng, size, self._num_actions, mask, minimum=self._minimum)

    def _redraw_forbidden(self, holding: np.ndarray, mask: np.ndarray) -> None:
        """Held actions the mask forbids now are drawn again among the valid ones."""
        indices = (self._held - self._minimum).reshape(len(self._held), *self._action_shape, 1)
        allowed = np.take_along_axis(mask, indices, axis=-1).reshape(len(self._held), -1).all(axis=1)
        forbidden = holding & ~allowed
        if forbidden.any():
            self._held[forbidden] = self._draw(int(forbidden.sum()), mask[forbidden])

    def _finish(self, ending: np.ndarray) -> None:
        """Ends the marked envs' holds and folds their lengths into the running mean."""
        count = int(ending.sum())
        if not count:
            return
        keep = (1.0 - HOLD_MEAN_RATE) ** count
        self.mean_hold = keep * self.mean_hold + (1.0 - keep) * float(self._steps_taken[ending].mean())
        self._steps_left[ending] = 0
        self._steps_taken[ending] = 0
