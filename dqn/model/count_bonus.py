"""Count-based exploration: a reward bonus beta / sqrt(n) for reaching an observation whose hash was seen n times.

Epsilon-greedy finds a reward only where random steps stumble on it. Where a reward needs a long exact sequence
(a pick-up, a drive, a drop-off) it rarely does, and a greedy policy that repeats a move that changes nothing sees no
new states at all. Counting how often each observation was reached and paying for rare ones ("#Exploration", Tang
et al., NeurIPS 2017) steers collection towards states it has not seen, and the pay fades where it has.

The hash is SimHash: the signs of a fixed random projection of the observation. Integer parts that the Q-network
one-hot encodes (a Discrete state, small MultiDiscrete elements) are one-hot here too, so each state gets its own
random code; other parts are standardised with the statistics of the warm-up's random play, so that no feature's
units decide the buckets. HASH_BITS sign bits bucket similar observations together, so continuous and image
observations, which never repeat exactly, still gather counts and their bonus fades.

Counts live in each actor: no network traffic, and a restarted actor counts afresh. Scope "actor" counts every
step of the actor's envs, so the bonus fades once the states are known. Scope "episode" counts within each env's
current episode only, as the episodic novelty of "Never Give Up" (Badia et al., ICLR 2020) does: the bonus never
fades, and a policy that stays put (bumping into a wall) sees its bonus fall within the episode while a step to a
state not yet visited in it still pays in full. Only the reward written to replay carries the bonus; episode
returns, evaluations and the kept policy's scores do not.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dqn.model.encoders import one_hot_depth

#: Sign bits of the hash. 16 give up to 65,536 buckets: distinct codes for every state of a Discrete space of a few
#: thousand, and coarse enough that a continuous observation's bucket is reached again within a run.
HASH_BITS = 16
#: Standardised features are clipped here, so one outlier of the warm-up's statistics does not flip every bit.
CLIP_STANDARDISED = 5.0


class CountBonus:
    """Per actor: the bonus of each env's next observation, counted by its SimHash code."""

    def __init__(self, observation_spec, beta: float, seed: int, scope: str = "actor"):
        if scope not in ("actor", "episode"):
            raise ValueError(f"count bonus scope must be actor or episode, got {scope!r}")
        self.beta, self.scope = beta, scope
        self._episode_counts: list[dict[int, int]] = []  # scope "episode": one dict per env
        self._specs = tf.nest.flatten(observation_spec)
        self._depths = [one_hot_depth(spec) for spec in self._specs]
        width = sum(self._width(spec, depth) for spec, depth in zip(self._specs, self._depths, strict=True))
        self._projection = np.random.default_rng(seed).standard_normal((width, HASH_BITS)).astype(np.float32)
        self._bit_values = (1 << np.arange(HASH_BITS, dtype=np.int64))
        self._sum = self._sum_squares = None
        self._seen = 0
        self._frozen = False
        self.counts: dict[int, int] = {}

    @staticmethod
    def _width(spec, depth: int | None) -> int:
        size = int(np.prod(spec.shape, dtype=np.int64))
        return size * depth if depth else size

    def observe_random_play(self, observations) -> None:
        """Adds a batch of the warm-up's observations to the standardising statistics (before `freeze`)."""
        if self._frozen:
            return
        features = self._numeric(observations)
        if self._sum is None:
            self._sum = np.zeros(features.shape[1], np.float64)
            self._sum_squares = np.zeros(features.shape[1], np.float64)
        self._sum += features.sum(axis=0)
        self._sum_squares += np.square(features).sum(axis=0)
        self._seen += len(features)

    def freeze(self) -> None:
        """Fixes the statistics: from here on a code always names the same region of observations."""
        self._frozen = True

    def bonus(self, observations, first: np.ndarray | None = None) -> np.ndarray:
        """The bonus beta / sqrt(n) per env after counting its observation (n >= 1).

        `first` marks the envs whose observation begins an episode: they are paid nothing (no transition ends
        there); in scope "episode" their counts start afresh with this observation, in scope "actor" it is not
        counted.
        """
        codes = self.codes(observations).tolist()
        first = np.zeros(len(codes), bool) if first is None else np.asarray(first, bool)
        if self.scope == "episode" and len(self._episode_counts) != len(codes):
            self._episode_counts = [{} for _ in codes]
        bonus = np.zeros(len(codes), np.float32)
        for row, code in enumerate(codes):
            if self.scope == "episode":
                counts = self._episode_counts[row]
                if first[row]:
                    counts.clear()
            elif first[row]:
                continue
            else:
                counts = self.counts
            count = counts.get(code, 0) + 1
            counts[code] = count
            if not first[row]:
                bonus[row] = self.beta / np.sqrt(count)
        return bonus

    def codes(self, observations) -> np.ndarray:
        """The HASH_BITS-bit SimHash code of each env's observation, as an int64 per env."""
        features = np.concatenate([self._standardised(self._numeric(observations)), self._one_hots(observations)],
                                  axis=1)
        bits = (features @ self._projection) > 0
        return bits.astype(np.int64) @ self._bit_values

    def _numeric(self, observations) -> np.ndarray:
        """The parts that are not one-hot, flattened per env, as float32 [N, features]."""
        parts = [np.asarray(part, np.float32).reshape(len(part), -1)
                 for part, depth in zip(tf.nest.flatten(observations), self._depths, strict=True) if not depth]
        rows = len(tf.nest.flatten(observations)[0])
        return np.concatenate(parts, axis=1) if parts else np.zeros((rows, 0), np.float32)

    def _one_hots(self, observations) -> np.ndarray:
        """The one-hot parts, each element's index one-hot, flattened per env."""
        parts = []
        for part, spec, depth in zip(tf.nest.flatten(observations), self._specs, self._depths, strict=True):
            if depth:
                indices = np.asarray(part, np.int64).reshape(len(part), -1) - np.asarray(spec.minimum, np.int64)
                parts.append(np.eye(depth, dtype=np.float32)[np.clip(indices, 0, depth - 1)].reshape(len(part), -1))
        rows = len(tf.nest.flatten(observations)[0])
        return np.concatenate(parts, axis=1) if parts else np.zeros((rows, 0), np.float32)

    def _standardised(self, features: np.ndarray) -> np.ndarray:
        if not self._seen or not features.shape[1]:
            return features
        mean = self._sum / self._seen
        std = np.sqrt(np.maximum(self._sum_squares / self._seen - np.square(mean), 0.0))
        # A feature random play never moved keeps its raw offset from the mean (std 1), so it still splits codes.
        scaled = (features - mean) / np.where(std > 1e-6, std, 1.0)
        return np.clip(scaled, -CLIP_STANDARDISED, CLIP_STANDARDISED).astype(np.float32)
