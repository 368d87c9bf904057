"""Stable-Baselines3 DQN on one env for a wall-clock budget, greedy evaluations written as JSON lines.

Runs with the bench-only peer virtualenv (never the service's), e.g.

    peers-venv/bin/python bench/peers/sb3_dqn.py --env-id popgym:popgym-PositionOnlyCartPoleEasy-v0 \
        --seed 1 --budget-s 240 --out runs/sb3.jsonl

Each line: `time` (epoch s), `train_step` (SB3 gradient updates), `env_steps`, `average_return` (10 greedy
episodes, deterministic=True, i.e. epsilon 0, on a separate env seeded per evaluation), as the service's
`evaluator/evals.jsonl`. Evaluations run in this process between training steps, every `--eval-every-s` of
training and at least 3x the last evaluation's duration apart, so evaluating takes at most about a quarter of the
budget. The exploration schedule is the published one over the published `n_timesteps`; the budget stops it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.published import PUBLISHED, minatar_policy_kwargs, wrap_env  # noqa: E402

#: The env authors' published settings (bench/peers/published.py). This older harness applies no `normalize`.
HYPERPARAMS = PUBLISHED


def make_env(env_id: str, seed: int | None = None):
    """`module:EnvId` as the service makes it, with the settings' `env_wrapper` ("flatten": one float vector).

    The service imports the module (it registers the id), then calls gymnasium.make.
    """
    import gymnasium as gym

    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    env = wrap_env(gym.make(name), HYPERPARAMS.get(env_id, {}))
    env.reset(seed=seed)
    return env


def evaluate(model, env_id: str, episodes: int, seed: int) -> float:
    """Average return of `episodes` greedy episodes on a fresh env."""
    env = make_env(env_id)
    total = 0.0
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            action, _ = model.predict(observation, deterministic=True)
            observation, reward, terminated, truncated, _ = env.step(int(action))
            total += float(reward)
            done = terminated or truncated
    env.close()
    return total / episodes


def main() -> None:
    """Trains until the budget (from --started-epoch) passes, evaluating as it goes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", required=True, choices=sorted(HYPERPARAMS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--started-epoch", type=float, default=None, help="launch time (default: now)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--eval-every-s", type=float, default=5.0)
    parser.add_argument("--out", required=True, help="JSON lines file to write")
    args = parser.parse_args()
    started = args.started_epoch or time.time()

    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)  # the service's roles run one BLAS thread each too; the box has 2 cores
    params = dict(HYPERPARAMS[args.env_id])
    source, n_timesteps, policy = params.pop("source"), params.pop("n_timesteps"), params.pop("policy")
    params.pop("env_wrapper", None)
    params.pop("normalize", None)
    env = make_env(args.env_id)
    if policy == "minatar":
        policy, params["policy_kwargs"] = "MlpPolicy", minatar_policy_kwargs()
    out = open(args.out, "w", encoding="utf-8")  # noqa: SIM115
    out.write(json.dumps({"source": source, "env_id": args.env_id, "seed": args.seed}) + "\n")

    class Budget(BaseCallback):
        """Stops at the budget; evaluates when enough training time has passed since the last evaluation."""

        def __init__(self):
            super().__init__()
            self.next_eval, self.evals = time.time(), 0

        def _on_step(self) -> bool:
            now = time.time()
            if now - started >= args.budget_s:
                return False
            if now >= self.next_eval:
                value = evaluate(self.model, args.env_id, args.eval_episodes, 10_000 * args.seed + self.evals)
                done = time.time()
                self.evals += 1
                out.write(json.dumps({"time": done, "train_step": self.model._n_updates,
                                      "env_steps": self.num_timesteps, "average_return": value}) + "\n")
                out.flush()
                self.next_eval = done + max(args.eval_every_s, 3 * (done - now))
            return True

    model = DQN(policy, env, seed=args.seed, verbose=0, device="cpu", **params)
    budget = Budget()
    # the schedule follows the published n_timesteps; past them SB3 stops, so training goes on (at the final
    # epsilon) with the same model, replay and evaluation clock until the budget
    while time.time() - started < args.budget_s:
        model.learn(total_timesteps=n_timesteps, callback=budget, reset_num_timesteps=False)
    out.close()


if __name__ == "__main__":
    main()
