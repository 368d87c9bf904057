"""One seeded bout of random play before training: what the env shows of itself that the auto settings follow.

A run plays its env once (`probe_env`) and hands every step to each rule's observer: the step cost for the replay
ratio (`StepTimes`, dqn/replay_layout/replay_ratio.py), the integer image values for `image_encoding`
(dqn/envs/image_codes.py) and the transitions for `observation_history` (dqn/envs/hidden_state.py). The resolve
step (dqn/resolve.py) is the only caller, so a run plays its env at most once however many settings are left at auto.

The play is seeded (the env's reset and its action space), so two probes of the same env see the same steps.
Where the env gives a mask of valid actions (in its Dict observation or its info, under `mask_key`), random play
draws among the valid actions only: an env may end an episode on an invalid one, or raise.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol

import numpy as np

from dqn.envs.action_masks import action_form_of, raw_mask
from dqn.envs.call_timer import EnvCallTimer
from dqn.envs.making import EnvOptions, make_gym_env

#: Random-play steps and seconds (from the first reset) the probe spends at most; it stops at whichever comes first.
PROBE_STEPS = 3000
PROBE_BUDGET_S = 2.0


class PlayedStep(NamedTuple):
    """What one call of random play returned: a reset's observation (no seconds, no action) or a step's."""

    observation: object
    seconds: float | None
    action: object | None
    reward: float = 0.0
    terminated: bool = False
    info: dict | None = None


class PlayObserver(Protocol):
    """What a rule keeps of random play: it sees every step, in order."""

    def see(self, step: PlayedStep) -> None:
        """Takes one reset or step."""


def random_play(env_id: str, options: EnvOptions, call_limit_s: float, seed: int, budget_s: float = PROBE_BUDGET_S,
                max_steps: int = PROBE_STEPS, mask_key: str | None = None) -> Iterator[PlayedStep]:
    """Each reset's and step's observation (with the step's seconds and action), for `max_steps` steps or `budget_s`.

    Every call into the env runs under `call_limit_s` (EnvCallTimeout past it); the budget's clock starts at the
    first reset, because a simulator that is slow to make is not slow to step. The env is closed when the iterator
    is exhausted or closed. With `mask_key`, actions are drawn among those the env's mask allows.
    """
    env = make_gym_env(env_id, options)
    rng = np.random.default_rng(seed)
    try:
        with EnvCallTimer(call_limit_s) as timer:
            env.action_space.seed(seed)
            timer.enter("reset")
            observation, info = env.reset(seed=seed)
            timer.leave()
            yield PlayedStep(observation, None, None, info=info)
            deadline = time.perf_counter() + budget_s
            for _ in range(max_steps):
                if time.perf_counter() >= deadline:
                    return
                mask = None if mask_key is None else raw_mask(observation, info, mask_key)
                action = env.action_space.sample() if mask is None else valid_random_action(env, mask, rng)
                timer.enter("step")
                started = time.perf_counter()
                observation, reward, terminated, truncated, info = env.step(action)
                seconds = time.perf_counter() - started
                timer.leave()
                yield PlayedStep(observation, seconds, action, float(reward), bool(terminated), info)
                if terminated or truncated:
                    timer.enter("reset")
                    observation, info = env.reset()
                    timer.leave()
                    yield PlayedStep(observation, None, None, info=info)
    finally:
        env.close()


def valid_random_action(env, mask, rng: np.random.Generator):
    """A uniform action among those the env's `mask` allows, in the service's layout (any action if none is)."""
    form = action_form_of(env)
    service = form.service_mask(mask)
    if not form.allows_some(service):
        return env.action_space.sample()
    valid = service.reshape(form.q_shape).astype(bool)
    if form.layout == "branching":  # one value per dimension, each among its valid ones
        return np.array([rng.choice(np.flatnonzero(row)) for row in valid], np.int64)
    return int(rng.choice(np.flatnonzero(valid))) + form.start[0] * (form.layout == "single")


def probe_env(env_id: str, options: EnvOptions, call_limit_s: float, seed: int, observers: Iterable[PlayObserver],
              budget_s: float = PROBE_BUDGET_S, max_steps: int = PROBE_STEPS, mask_key: str | None = None) -> None:
    """Plays the env once at random and shows every step to each observer (errors of the env propagate)."""
    observers = list(observers)
    play = random_play(env_id, options, call_limit_s, seed, budget_s, max_steps, mask_key)
    try:
        for step in play:
            for observer in observers:
                observer.see(step)
    finally:
        play.close()


class StepTimes:
    """The wall time of each step of random play (resets excluded)."""

    def __init__(self):
        self.seconds: list[float] = []

    def see(self, step: PlayedStep) -> None:
        """Keeps a step's seconds."""
        if step.seconds is not None:
            self.seconds.append(step.seconds)

    def median(self) -> float | None:
        """The median step time, or None if no step was played.

        The median, not the mean: a step the scheduler preempts (other processes starting) is not the env's cost.
        """
        return statistics.median(self.seconds) if self.seconds else None
