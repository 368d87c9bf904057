"""User envs that raise, registered for the fault tests as `tests.flaky_env:<id>` (gymnasium imports the module).

FlakyCartPole-v0 raises in `step` on every `fail_every`-th step of an instance and in `reset` on every
`reset_fail_every`-th reset in the process; BrokenCartPole-v0 raises in every `reset` (a broken env);
HangOnFileCartPole-v0 never returns from a step taken once the file named by $HANG_FILE exists (a stuck env; without
the variable it never hangs, so a replay server can play it to decide the run's settings).
"""

from __future__ import annotations

import itertools
import os
import threading

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

_resets = itertools.count(1)


class EnvBug(RuntimeError):
    """What the user's env raises."""


class FlakyCartPole(CartPoleEnv):
    """CartPole that raises now and then, as a user's env with a rare bug does."""

    def __init__(self, fail_every: int = 1000, reset_fail_every: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.fail_every = fail_every
        self.reset_fail_every = reset_fail_every
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.fail_every and self.steps % self.fail_every == 0:
            raise EnvBug(f"simulated env bug at step {self.steps}")
        return super().step(action)

    def reset(self, *, seed=None, options=None):
        if self.reset_fail_every and next(_resets) % self.reset_fail_every == 0:
            raise EnvBug("simulated env bug at reset")
        return super().reset(seed=seed, options=options)


class BrokenCartPole(CartPoleEnv):
    """CartPole whose reset always raises."""

    def reset(self, *, seed=None, options=None):
        raise EnvBug("this env cannot reset")


class HangOnFileCartPole(CartPoleEnv):
    """CartPole whose step blocks for good once the file $HANG_FILE exists."""

    def step(self, action):
        if os.path.exists(os.environ.get("HANG_FILE", "")):
            threading.Event().wait()
        return super().step(action)


for _id, _entry, _kwargs in (("FlakyCartPole-v0", FlakyCartPole, {"fail_every": 1000}),
                             ("VeryFlakyCartPole-v0", FlakyCartPole, {"fail_every": 5}),
                             ("BrokenCartPole-v0", BrokenCartPole, {}),
                             ("HangOnFileCartPole-v0", HangOnFileCartPole, {})):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, kwargs=_kwargs, max_episode_steps=500, reward_threshold=475.0)
