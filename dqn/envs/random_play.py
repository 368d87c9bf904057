"""What a second of random play shows of the user's env before training: its step cost, its image values, its dynamics.

Four settings follow from it when left at auto. A slow env (a driving simulator at 20 ms a step) leaves the learner
idle at the default replay ratio, so `samples_per_insert` rises with the step cost (`auto_samples_per_insert`).
An integer image whose values stay small although its Box allows 0-255 is a grid of category codes (MiniGrid's
object, colour and state indices): `image_encoding` one-hot encodes such codes (dqn/model/encoders.py). A vector
observation that misses part of the state (a velocity) gets an `observation_history` (dqn/envs/hidden_state.py).
An action that mostly changes nothing and earns nothing widens the action gap (dqn/envs/idle_actions.py).

Random play is seeded (the env's reset and its action space), so every role of a run that plays it sees the same.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from dqn.envs.call_timer import EnvCallTimer
from dqn.envs.making import EnvOptions, make_gym_env


class PlayedStep(NamedTuple):
    """What one call of random play returned: a reset's observation (no seconds, no action) or a step's."""

    observation: object
    seconds: float | None
    action: object | None
    reward: float = 0.0
    terminated: bool = False


def random_play(env_id: str, options: EnvOptions, call_limit_s: float, seed: int, budget_s: float,
                max_steps: int) -> Iterator[PlayedStep]:
    """Each reset's and step's observation (with the step's seconds and action), for `max_steps` steps or `budget_s`.

    Every call into the env runs under `call_limit_s` (EnvCallTimeout past it); the env is closed when the
    iterator is exhausted or closed.
    """
    env = make_gym_env(env_id, options)
    try:
        with EnvCallTimer(call_limit_s) as timer:
            env.action_space.seed(seed)
            timer.enter("reset")
            observation, _ = env.reset(seed=seed)
            timer.leave()
            yield PlayedStep(observation, None, None)
            deadline = time.perf_counter() + budget_s
            for _ in range(max_steps):
                if time.perf_counter() >= deadline:
                    return
                action = env.action_space.sample()
                timer.enter("step")
                started = time.perf_counter()
                observation, reward, terminated, truncated, _ = env.step(action)
                seconds = time.perf_counter() - started
                timer.leave()
                yield PlayedStep(observation, seconds, action, float(reward), bool(terminated))
                if terminated or truncated:
                    timer.enter("reset")
                    observation, _ = env.reset()
                    timer.leave()
                    yield PlayedStep(observation, None, None)
    finally:
        env.close()


def measure_step_seconds(env_id: str, options: EnvOptions, call_limit_s: float, budget_s: float = 1.0,
                         max_steps: int = 200, seed: int = 0) -> float:
    """The median wall time of one `step` of random play (resets excluded), within about `budget_s`.

    The median, not the mean: roles start together, and a step the scheduler preempts would count the other
    processes' start-up as the env's cost.
    """
    play = random_play(env_id, options, call_limit_s, seed, budget_s, max_steps)
    try:
        return statistics.median(step.seconds for step in play if step.seconds is not None)
    finally:
        play.close()


def largest_value(env_id: str, options: EnvOptions, call_limit_s: float, parts: Callable[[object], list],
                  stop_at: int, budget_s: float = 1.0, max_steps: int = 1000, seed: int = 0) -> int:
    """The largest value random play shows in the arrays `parts(observation)` picks, or `stop_at` once one reaches it.

    Stops early: an Atari frame shows a value far above any category code at its first reset.
    """
    largest = 0
    play = random_play(env_id, options, call_limit_s, seed, budget_s, max_steps)
    try:
        for step in play:
            largest = max([largest, *(int(np.max(part)) for part in parts(step.observation))])
            if largest >= stop_at:
                return stop_at
        return largest
    finally:
        play.close()
