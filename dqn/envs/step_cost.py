"""What one step of the user's env costs: the replay ratio follows it when `samples_per_insert` is auto.

A slow env (a driving simulator at 20 ms a step) leaves the learner idle at the default replay ratio, so an auto
ratio samples each of its transitions more often (`dqn/replay_layout/tables.py`, `auto_samples_per_insert`).
"""

from __future__ import annotations

import statistics
import time

from dqn.envs.call_timer import EnvCallTimer
from dqn.envs.making import EnvOptions, make_gym_env


def measure_step_seconds(env_id: str, options: EnvOptions, call_limit_s: float, budget_s: float = 1.0,
                         max_steps: int = 200, seed: int = 0) -> float:
    """The median wall time of one `step` of random play (resets excluded), within about `budget_s`.

    The median, not the mean: roles start together, and a step the scheduler preempts would count the other
    processes' start-up as the env's cost. Every call runs under `call_limit_s` (EnvCallTimeout past it).
    """
    env = make_gym_env(env_id, options)
    timer = EnvCallTimer(call_limit_s)
    armed = timer.arm()
    try:
        env.action_space.seed(seed)
        timer.enter("reset")
        env.reset(seed=seed)
        timer.leave()
        durations: list[float] = []
        deadline = time.perf_counter() + budget_s
        while len(durations) < max_steps and time.perf_counter() < deadline:
            action = env.action_space.sample()
            timer.enter("step")
            started = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            durations.append(time.perf_counter() - started)
            timer.leave()
            if terminated or truncated:
                timer.enter("reset")
                env.reset()
                timer.leave()
        return statistics.median(durations)
    finally:
        if armed:
            timer.disarm()
        env.close()
