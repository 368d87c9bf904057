"""Integer images that hold category codes, not intensities: which parts can, and how `image_encoding` auto decides.

MiniGrid's 7x7x3 view holds object, colour and state indices (0-10, 0-5, 0-2) in a Box declared 0-255. Divided
by 255, a wall (2) and a door (4) differ by 0.008 and read as "a little more of the same"; one-hot, they are
different inputs, as they are to the game. Pixels and code grids cannot be told apart from the Box alone, so auto
looks at the values: an integer image is read as codes when its Box allows only values below CODE_DEPTH, or when
the run's seeded random play shows none that high (an Atari frame shows one at its first reset).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dqn.envs.random_play import PlayedStep
from dqn.envs.spaces import is_image

#: Integer image values below this can be category codes; a code image gets this many one-hot channels per channel.
CODE_DEPTH = 16


def is_integer_image(spec) -> bool:
    """An image part of non-negative integers beyond 0/1 (bool grids and masks are 0/1 already): codes or pixels."""
    return (is_image(spec) and np.issubdtype(np.dtype(tf.as_dtype(spec.dtype).as_numpy_dtype), np.integer)
            and float(np.min(spec.minimum)) >= 0 and float(np.max(spec.maximum)) > 1)


class LargestImageValues:
    """The largest value random play shows in the integer image parts of an observation spec."""

    def __init__(self, observation_spec):
        self._picked = [is_integer_image(spec) for spec in tf.nest.flatten(observation_spec)]
        self.largest = 0

    @property
    def watching(self) -> bool:
        """Whether the spec has integer image parts at all."""
        return any(self._picked)

    def see(self, step: PlayedStep) -> None:
        """Keeps the largest value of the step's integer image parts."""
        if self.largest >= CODE_DEPTH or not self.watching:
            return  # a frame of pixels shows a value far above any category code at its first reset
        parts = [part for part, keep in zip(tf.nest.flatten(step.observation), self._picked, strict=True) if keep]
        self.largest = max([self.largest, *(int(np.max(part)) for part in parts)])


def image_encoding_for(observation_spec, play: LargestImageValues | None) -> tuple[str, str | None]:
    """("scaled" or "one-hot", why) for auto: from the spec where its bounds tell, else from what random play showed.

    `why` is None where nothing needed deciding (no integer image part); `play` None means random play failed.
    """
    images = [spec for spec in tf.nest.flatten(observation_spec) if is_integer_image(spec)]
    if not images:
        return "scaled", None
    if max(float(np.max(spec.maximum)) for spec in images) < CODE_DEPTH:
        return "one-hot", f"the integer image's bounds allow only values below {CODE_DEPTH}"
    if play is None:
        return "scaled", "random play failed"
    if play.largest < CODE_DEPTH:
        return "one-hot", f"random play showed integer image values up to {play.largest}"
    return "scaled", f"random play showed integer image values of {CODE_DEPTH} or more"
