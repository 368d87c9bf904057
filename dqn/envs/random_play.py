"""One seeded bout of random play before training: what the env shows of itself that the auto settings follow.

A run plays its env once (`probe_env`) and hands every step to each rule's observer: the step cost for the replay
ratio (`StepTimes`, dqn/replay_layout/replay_ratio.py), the integer image values for `image_encoding`
(dqn/envs/image_codes.py), the transitions for `observation_history` (dqn/envs/hidden_state.py) and the actions
that change nothing for `action_gap_alpha` (dqn/envs/idle_actions.py). The resolve step (dqn/resolve.py) is the
only caller, so a run plays its env at most once however many settings are left at auto.

The play is seeded (the env's reset and its action space), so two probes of the same env see the same steps.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol

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


class PlayObserver(Protocol):
    """What a rule keeps of random play: it sees every step, in order."""

    def see(self, step: PlayedStep) -> None:
        """Takes one reset or step."""


def random_play(env_id: str, options: EnvOptions, call_limit_s: float, seed: int, budget_s: float = PROBE_BUDGET_S,
                max_steps: int = PROBE_STEPS) -> Iterator[PlayedStep]:
    """Each reset's and step's observation (with the step's seconds and action), for `max_steps` steps or `budget_s`.

    Every call into the env runs under `call_limit_s` (EnvCallTimeout past it); the budget's clock starts at the
    first reset, because a simulator that is slow to make is not slow to step. The env is closed when the iterator
    is exhausted or closed.
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


def probe_env(env_id: str, options: EnvOptions, call_limit_s: float, seed: int, observers: Iterable[PlayObserver],
              budget_s: float = PROBE_BUDGET_S, max_steps: int = PROBE_STEPS) -> None:
    """Plays the env once at random and shows every step to each observer (errors of the env propagate)."""
    observers = list(observers)
    play = random_play(env_id, options, call_limit_s, seed, budget_s, max_steps)
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
