"""Stable-Baselines3 DQN on Breakout at rl-baselines3-zoo's Atari settings: its SGD steps/s on this box.

Runs with the bench-only peer virtualenv (never the service's; it needs `ale-py==0.11.2 opencv-python-headless`):

    peers-venv/bin/python bench/peers/sb3_atari_rate.py --seconds 300

The zoo's `hyperparams/dqn.yml` `atari` entry: AtariWrapper, 4-frame stack, CnnPolicy (Nature DQN's network),
buffer 100k, Adam 1e-4, batch 32, one gradient step every 4 env steps, target copy every 1,000 steps, epsilon
1 -> 0.01 over 10 % of 10M steps. One change for a rate measurement: learning starts after 1,000 steps instead of
100,000, so updates begin within seconds. Prints the gradient steps per second over the window from `--skip-s`
after the first update to the end, with torch's default threads (all cores), in one process as SB3 runs.
"""

from __future__ import annotations

import argparse
import json
import time

ZOO_ATARI = dict(buffer_size=100_000, learning_rate=1e-4, batch_size=32, target_update_interval=1_000,
                 train_freq=4, gradient_steps=1, exploration_fraction=0.1, exploration_final_eps=0.01,
                 optimize_memory_usage=False)
N_TIMESTEPS = 10_000_000
LEARNING_STARTS = 1_000  # the zoo: 100,000 (see the docstring)


def atari_env(env_id: str, seed: int, **wrapper_kwargs):
    """The zoo's Atari env: one AtariWrapper env (its options overridable), 4 frames stacked."""
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    return VecFrameStack(make_atari_env(env_id, n_envs=1, seed=seed, wrapper_kwargs=wrapper_kwargs), n_stack=4)


def main() -> None:
    """Trains for --seconds and prints the measured rates as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--skip-s", type=float, default=30.0, help="seconds after the first update left out")
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    env = atari_env(args.env_id, args.seed)
    model = DQN("CnnPolicy", env, learning_starts=LEARNING_STARTS, seed=args.seed, verbose=0, **ZOO_ATARI)
    started = time.monotonic()
    marks: list[tuple[float, int, int]] = []  # (time, gradient steps, env steps) once updates began

    class Clock(BaseCallback):
        def _on_step(self) -> bool:
            now = time.monotonic()
            if self.model._n_updates > 0 and (not marks or now - marks[-1][0] >= 1.0):
                marks.append((now, self.model._n_updates, self.model.num_timesteps))
            return now - started < args.seconds

    model.learn(total_timesteps=N_TIMESTEPS, callback=Clock())
    first = next(m for m in marks if m[0] - marks[0][0] >= args.skip_s)
    last = marks[-1]
    window = last[0] - first[0]
    print(json.dumps({"sgd_steps_per_s": round((last[1] - first[1]) / window, 2),
                      "env_steps_per_s": round((last[2] - first[2]) / window, 1), "window_s": round(window, 1),
                      "torch_threads": torch.get_num_threads(), "env_id": args.env_id}))


if __name__ == "__main__":
    main()
