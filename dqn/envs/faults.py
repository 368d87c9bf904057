"""Sub-environments that raise: recreated and reset instead of ending the process.

A user's env may raise now and then (a simulator hiccup, a bad state), hang (dqn/envs/call_timer.py), or return
NaN or infinity. `RecoveringEnv` wraps each sub-env of the vector env: an exception in `step`, a call past its time
limit, or a non-finite observation or reward (found by the vector env, `mark_non_finite`) ends that env's episode
as a truncation (the step carries the last good observation and reward 0, and `GymnasiumVectorEnvironment.faulted`
marks it); the next call to the sub-env recreates it from its factory and resets it. An env that fails `RESET_ATTEMPTS`
times in a row at reset is broken, not flaky: `EnvFailed` ends the process with one line. `RestartBudget`
bounds the restarts per window of env steps, so an env that fails on most steps ends the process too.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import logging
import traceback
from collections.abc import Callable
from time import monotonic as _monotonic
from typing import Any

import gymnasium as gym

from dqn.envs.call_timer import EnvCallTimer
from dqn.errors import ServiceError

log = logging.getLogger("envs")

#: Recreate-and-reset attempts of one sub-env in a row before it counts as broken.
RESET_ATTEMPTS = 3


class EnvFailed(ServiceError):
    """A user's env that keeps failing; the message names the env and its error."""


class BrokenEnvPromise(RuntimeError):
    """An env broke a rule a wrapper of ours checks; its message says which (a traceback would show our wrapper)."""


@dataclasses.dataclass(frozen=True)
class EnvFault:
    """One exception raised by a sub-env (then recreated)."""

    index: int  # position of the sub-env in the vector env
    phase: str  # "step" or "reset"
    error: str  # "TypeName: message"
    traceback: str


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class RecoveringEnv(gym.Wrapper):
    """A sub-env that recreates itself (from `make_env`) after it raises; faults go to the shared `faults` list."""

    def __init__(self, env: gym.Env, make_env: Callable[[], gym.Env], index: int, faults: list[EnvFault],
                 env_id: str, timer: EnvCallTimer | None = None):
        super().__init__(env)
        self._make_env = make_env
        self._index = index
        self._faults = faults
        self._env_id = env_id
        self._timer = timer or EnvCallTimer(0)
        # What the timer names when a call hangs; made once, not on every call.
        self._step_call = f"env {env_id!r} sub-env {index} step"
        self._reset_call = f"env {env_id!r} sub-env {index} reset"
        self._broken = False
        self._reset_at_next_step = False  # set by mark_non_finite when the vector env will not reset it itself
        self._recreations = 0  # how many times this sub-env was made anew (each gets a seed of its own)
        self._last_observation: Any = None
        self._seed: int | None = None
        # The info of the last step or reset, kept by reference (no copy on the actor's hot path); the vector
        # env reads it where an episode ends (GymnasiumVectorEnvironment.infos, final_infos).
        self.info: dict = {}

    def _record(self, phase: str, error: BaseException | str, trace: str | None = None) -> None:
        description = error if isinstance(error, str) else _describe(error)
        if isinstance(error, BrokenEnvPromise):
            trace = ""
        fault = EnvFault(self._index, phase, description, traceback.format_exc() if trace is None else trace)
        log_fault(self._env_id, fault)  # now: a fault that ends the process is in the log before the exit line
        self._faults.append(fault)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Resets the env; a broken one (or one whose reset raises) is first recreated, up to RESET_ATTEMPTS."""
        if seed is not None:
            self._seed = seed
        elif self._broken and self._seed is not None:
            # A recreated env gets a seed of its own, so the run stays reproducible without replaying the failure.
            seed = self._seed + 1_000_003 * (self._recreations + 1)
        self._reset_at_next_step = False
        last: BaseException | None = None
        for attempt in range(RESET_ATTEMPTS):
            try:
                self._timer.enter(self._reset_call)
                try:
                    if self._broken:
                        self._recreate()
                    observation, info = self.env.reset(seed=seed, options=options)
                finally:
                    self._timer.leave()
            except Exception as error:  # noqa: BLE001 - any error of a user's env: recreate it
                self._record("reset", error)
                self._broken = True
                seed = None if self._seed is None else self._seed + 1_000_003 * (self._recreations + 2 + attempt)
                last = error
                continue
            self._broken = False
            self._last_observation = copy.deepcopy(observation)
            self.info = info
            return observation, info
        raise EnvFailed(f"env {self._env_id!r} (sub-env {self._index}) failed at reset {RESET_ATTEMPTS} times in "
                        f"a row, recreated each time; last error: {_describe(last)}. Fix the env (its traceback is "
                        "in the log above)") from None

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        """Steps the env; if it raises or hangs, ends the episode as a truncation with the last good observation.

        After `mark_non_finite` the env is recreated and reset instead, and the reset observation comes back as
        this step's (the vector env labels it the first step of an episode).
        """
        if self._reset_at_next_step:
            observation, info = self.reset()
            return observation, 0.0, False, False, info
        timer = self._timer
        try:
            timer.call, timer.entered_at = self._step_call, _monotonic()  # timer.enter(), inlined: the hot path
            try:
                observation, reward, terminated, truncated, info = self.env.step(action)
            finally:
                timer.entered_at = None
        except Exception as error:  # noqa: BLE001 - any error of a user's env: recreate it at the reset
            self._record("step", error)
            self._broken = True
            self.info = {}
            return self._last_observation, 0.0, False, True, self.info
        self._last_observation = observation
        self.info = info
        return observation, reward, terminated, truncated, info

    def mark_non_finite(self, what: str, last_good_observation: Any) -> None:
        """The last step returned NaN or infinity in `what`: a fault like an exception; recreated before its next step.

        `last_good_observation` replaces the bad one as what the next fault would repeat.
        """
        self._record("step", f"non-finite {what} (NaN or infinity)", trace="")
        self._broken = True
        self._reset_at_next_step = True
        self._last_observation = last_good_observation

    def _recreate(self) -> None:
        self._recreations += 1
        try:
            self.env.close()
        except Exception:  # noqa: BLE001 - the old env is broken; closing it is best effort
            pass
        self.env = self._make_env()


class RestartBudget:
    """At most `max_restarts` sub-env restarts within any `window_steps` env steps; 0 restarts = fail at once."""

    def __init__(self, env_id: str, max_restarts: int | None, window_steps: int):
        self._env_id = env_id
        self._max_restarts = max_restarts
        self._window_steps = window_steps
        self._recent: collections.deque[int] = collections.deque()

    def charge(self, faults: list[EnvFault], env_steps: int) -> None:
        """Counts new faults at `env_steps`; raises EnvFailed once the window holds more than the budget."""
        if self._max_restarts is None or not faults:
            return
        self._recent.extend([env_steps] * len(faults))
        while self._recent and self._recent[0] <= env_steps - self._window_steps:
            self._recent.popleft()
        if len(self._recent) > self._max_restarts:
            fault = faults[-1]
            raise EnvFailed(
                f"env {self._env_id!r} failed {len(self._recent)} times within {self._window_steps} env steps "
                f"(limit --max-env-restarts {self._max_restarts}); last: sub-env {fault.index} raised in "
                f"{fault.phase}: {fault.error}. Fix the env (its traceback is in the log above), or raise the limit")


def log_fault(env_id: str, fault: EnvFault) -> None:
    """One log entry per fault, with the env's traceback."""
    trace = f"\n{fault.traceback.rstrip()}" if fault.traceback else ""
    log.warning("env %r sub-env %d failed in %s (%s); recreating and resetting it, its episode is dropped%s",
                env_id, fault.index, fault.phase, fault.error, trace)
