"""Atari ids (ale-py's `AtariEnv`, e.g. `ALE/Breakout-v5`): the book's preprocessing, applied in every role.

`AtariPreprocessing` (no-op starts, frame skip with max-pooling, 84x84 grayscale) and a frame stack, laid out
channels-last as uint8 (H, W, stack) so Conv2D reads it and replay stores bytes, not floats.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np


@functools.cache
def _register_atari() -> bool:
    """Registers ale-py's ids with gymnasium (1.x no longer does it by itself); False without ale-py."""
    try:
        import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)
    return True


def is_atari(env_id: str) -> bool:
    """True for ids whose env is ale-py's AtariEnv (ALE/Breakout-v5, BreakoutNoFrameskip-v4, ...)."""
    if env_id not in gym.registry:
        _register_atari()
    spec = gym.registry.get(env_id)
    return spec is not None and spec.entry_point == "ale_py.env:AtariEnv"


class StackedFramesLast(gym.ObservationWrapper):
    """(stack, H, W[, C]) -> (H, W, stack * C): channels last, the layout Keras' Conv2D expects."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(self.observation(space.low), self.observation(space.high),
                                                dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """Moves the stack axis last and merges it with the color channels, if any."""
        stacked = np.moveaxis(np.asarray(observation), 0, -1)
        return np.ascontiguousarray(stacked.reshape(*stacked.shape[:2], -1))


def atari_make_kwargs(options) -> dict[str, Any]:
    """gym.make keyword arguments of an Atari id under `options` (an `EnvOptions`)."""
    # AtariPreprocessing skips frames itself, max-pooling the last two (the Nature paper's flicker fix);
    # ALE-v5's built-in frameskip=4 would compound to 16 frames per action, so the ALE env must not skip.
    return {"frameskip": 1, "repeat_action_probability": options.atari_repeat_action_probability}


def atari_wrappers(options) -> list[Callable[[gym.Env], gym.Env]]:
    """The book's preprocessing under `options` (an `EnvOptions`), innermost first."""
    return [
        lambda env: gym.wrappers.AtariPreprocessing(
            env, noop_max=options.atari_noop_max, frame_skip=options.atari_frame_skip,
            screen_size=options.atari_screen_size, terminal_on_life_loss=options.atari_terminal_on_life_loss,
            grayscale_obs=options.atari_grayscale),
        lambda env: gym.wrappers.FrameStackObservation(env, options.atari_frame_stack),
        StackedFramesLast,
    ]
