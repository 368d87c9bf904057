"""Integer images that hold category codes, not intensities: which parts can, and how `image_encoding` auto decides.

MiniGrid's 7x7x3 view holds object, colour and state indices (0-10, 0-5, 0-2) in a Box declared 0-255. Divided
by 255, a wall (2) and a door (4) differ by 0.008 and read as "a little more of the same"; one-hot, they are
different inputs, as they are to the game. Pixels and code grids cannot be told apart from the Box alone, so auto
looks at the values: an integer image is read as codes when its Box allows only values below CODE_DEPTH, or when
a second of seeded random play shows none that high (an Atari frame shows one at its first reset).
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from dqn.envs.making import EnvOptions
from dqn.envs.random_play import largest_value
from dqn.envs.spaces import is_image

log = logging.getLogger(__name__)

#: Integer image values below this can be category codes; a code image gets this many one-hot channels per channel.
CODE_DEPTH = 16


def is_integer_image(spec) -> bool:
    """An image part of non-negative integers beyond 0/1 (bool grids and masks are 0/1 already): codes or pixels."""
    return (is_image(spec) and np.issubdtype(np.dtype(tf.as_dtype(spec.dtype).as_numpy_dtype), np.integer)
            and float(np.min(spec.minimum)) >= 0 and float(np.max(spec.maximum)) > 1)


def resolve_image_encoding(config, observation_spec, options: EnvOptions) -> str:
    """"scaled" or "one-hot": `config.image_encoding`, with auto decided from the spec or from random play.

    Random play is seeded with `config.seed`, so every role of a run decides alike (`local` decides once for all);
    where it fails, auto falls back to scaled with a warning.
    """
    if config.image_encoding != "auto":
        return config.image_encoding
    picked = [is_integer_image(spec) for spec in tf.nest.flatten(observation_spec)]
    images = [spec for spec, keep in zip(tf.nest.flatten(observation_spec), picked, strict=True) if keep]
    if not images:
        return "scaled"
    if max(float(np.max(spec.maximum)) for spec in images) < CODE_DEPTH:
        return "one-hot"

    def image_parts(observation) -> list:
        return [part for part, keep in zip(tf.nest.flatten(observation), picked, strict=True) if keep]

    try:
        largest = largest_value(config.env_id, options, config.env_call_timeout_s, image_parts, CODE_DEPTH,
                                seed=config.seed)
    except Exception as error:  # noqa: BLE001 - the user's env; the actors report its faults where they matter
        log.warning("image_encoding auto: random play failed (%s: %s); using scaled", type(error).__name__, error)
        return "scaled"
    encoding = "one-hot" if largest < CODE_DEPTH else "scaled"
    seen = str(largest) if largest < CODE_DEPTH else f"{CODE_DEPTH} or more"
    log.info("image_encoding auto: %s (random play showed integer image values up to %s)", encoding, seen)
    return encoding
