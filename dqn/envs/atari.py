"""Atari ids (ale-py's `AtariEnv`, e.g. `ALE/Breakout-v5`): the book's preprocessing, applied in every role.

`AtariPreprocessing` (no-op starts, frame skip with max-pooling, 84x84 grayscale) and a frame stack, laid out
channels-last as uint8 (H, W, stack) so Conv2D reads it and replay stores bytes, not floats. Opt-in training aids
of DQN's Atari practice (Nature DQN, CleanRL's and SB3's wrappers): a lost life ends the episode for learning while
the game goes on, FIRE pressed at each start, rewards clipped to their sign. The evaluator plays whole games with
unclipped scores (`EnvOptions.for_evaluation`).
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


#: ALE's action numbers for every game: 0 is NOOP; FIRE, where a game has it, is 1.
NOOP, FIRE = 0, 1


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


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode (a terminal for the TD target), but the next reset goes on with the same game.

    Nature DQN's training signal: the agent learns that losing a life is the end of its returns, while it still
    sees every stage of a game. gymnasium's `AtariPreprocessing(terminal_on_life_loss=True)` restarts the whole
    game at that reset instead, so a policy would only ever train on its first life.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def step(self, action):
        """The wrapped step; `terminated` also at a lost life."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return observation, reward, terminated, truncated, info

    def reset(self, **kwargs):
        """A new game after a game over or with a seed; after a lost life, one no-op step of the same game."""
        if self._game_over or kwargs.get("seed") is not None:
            observation, info = self.env.reset(**kwargs)
        else:
            observation, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:  # the no-op itself ended the game
                observation, info = self.env.reset(**kwargs)
        self._game_over = False
        self._lives = self.env.unwrapped.ale.lives()
        return observation, info


class FireOnReset(gym.Wrapper):
    """Presses FIRE after every reset, in games that need it to start (Breakout serves the ball on FIRE)."""

    def reset(self, **kwargs):
        """The wrapped reset, then one FIRE step (a new reset if that step ended the episode)."""
        observation, info = self.env.reset(**kwargs)
        observation, _, terminated, truncated, info = self.env.step(FIRE)
        if terminated or truncated:
            observation, info = self.env.reset(**kwargs)
        return observation, info


def needs_fire(env: gym.Env) -> bool:
    """True for games whose action set has FIRE as action 1 (where ALE puts it)."""
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) > FIRE and meanings[FIRE] == "FIRE"


def atari_make_kwargs(options) -> dict[str, Any]:
    """gym.make keyword arguments of an Atari id under `options` (an `EnvOptions`)."""
    # AtariPreprocessing skips frames itself, max-pooling the last two (the Nature paper's flicker fix);
    # ALE-v5's built-in frameskip=4 would compound to 16 frames per action, so the ALE env must not skip.
    return {"frameskip": 1, "repeat_action_probability": options.atari_repeat_action_probability}


def atari_wrappers(options) -> list[Callable[[gym.Env], gym.Env]]:
    """The book's preprocessing under `options` (an `EnvOptions`), innermost first."""
    wrappers: list[Callable[[gym.Env], gym.Env]] = [
        lambda env: gym.wrappers.AtariPreprocessing(
            env, noop_max=options.atari_noop_max, frame_skip=options.atari_frame_skip,
            screen_size=options.atari_screen_size, grayscale_obs=options.atari_grayscale),
    ]
    if options.atari_terminal_on_life_loss:
        wrappers.append(EpisodicLife)
    if options.atari_fire_on_reset:  # outside EpisodicLife: FIRE after a lost life too, as after a new game
        wrappers.append(lambda env: FireOnReset(env) if needs_fire(env) else env)
    if options.atari_clip_rewards:
        wrappers.append(lambda env: gym.wrappers.TransformReward(env, lambda reward: float(np.sign(reward))))
    return wrappers + [lambda env: gym.wrappers.FrameStackObservation(env, options.atari_frame_stack),
                       StackedFramesLast]
