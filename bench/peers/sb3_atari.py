"""Stable-Baselines3 DQN learning Breakout at rl-baselines3-zoo's Atari settings for a wall-clock budget.

Runs with the bench-only peer virtualenv (never the service's; it needs `ale-py==0.11.2 opencv-python-headless`):

    peers-venv/bin/python bench/peers/sb3_atari.py --seed 1 --budget-s 5400 --out runs/sb3-breakout.jsonl

Training is the zoo's `hyperparams/dqn.yml` `atari` entry unchanged (AtariWrapper: no-op and FIRE resets, a lost
life ends a training episode, rewards clipped; 4-frame stack; CnnPolicy; buffer 100k, learning from 100k steps,
Adam 1e-4, batch 32, one update per 4 steps, target copy every 1,000 steps, epsilon 1 -> 0.01 over 10 % of 10M
steps), torch's default threads, training in one process as SB3 runs. Evaluation follows the service's Atari protocol:
every `--eval-every-s` of wall clock, 5 whole games (no end at a lost life, unclipped score) at epsilon 0.05, each
cut at 4,500 agent steps (18,000 frames); a new best is re-checked on 10 fresh games. As in the service, a
separate evaluator process on one thread scores the newest policy snapshot while training goes on.
Each line: `time` (epoch s), `train_step` (gradient updates), `env_steps`, `average_return`, `confirmed_return`.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from sb3_atari_rate import N_TIMESTEPS, ZOO_ATARI, atari_env

ZOO_LEARNING_STARTS = 100_000
EVAL_EPSILON, EVAL_MAX_STEPS, EVAL_EPISODES, CONFIRM_EPISODES = 0.05, 4_500, 5, 10


def evaluate(model, env_id: str, episodes: int, seed: int) -> float:
    """Average unclipped score of `episodes` whole games at epsilon 0.05, each cut at 18,000 frames."""
    env = atari_env(env_id, seed, terminal_on_life_loss=False, clip_reward=False)
    rng, scores = np.random.default_rng(seed), []
    for _ in range(episodes):
        observation, score, steps, done = env.reset(), 0.0, 0, False
        while not done and steps < EVAL_MAX_STEPS:
            action, _ = model.predict(observation, deterministic=True)
            if rng.random() < EVAL_EPSILON:
                action = np.array([env.action_space.sample()])
            observation, reward, dones, _ = env.step(action)
            score, steps, done = score + float(reward[0]), steps + 1, bool(dones[0])
        scores.append(score)
    env.close()
    return float(np.mean(scores))


def evaluator(env_id: str, seed: int, snapshot: str, out_path: str, stop_path: str) -> None:
    """The evaluator process: evaluates each new policy snapshot (a new best re-checked), as the service's does."""
    import os

    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(1)  # the service's evaluator runs on one core too
    model = DQN("CnnPolicy", atari_env(env_id, seed), buffer_size=1, learning_starts=0, device="cpu")
    best, last_step, evals = None, -1, 0
    with open(out_path, "a", encoding="utf-8") as out:
        while not os.path.exists(stop_path):
            try:
                state = torch.load(snapshot)
            except (OSError, EOFError, RuntimeError):  # none yet, or being replaced
                state = None
            if state is None or state["train_step"] == last_step:
                time.sleep(1.0)
                continue
            last_step, evals = state["train_step"], evals + 1
            model.policy.load_state_dict(state["policy"])
            episodes_seed = 10_000 * seed + 100 * evals
            value, confirmed = evaluate(model, env_id, EVAL_EPISODES, episodes_seed), None
            if best is None or value > best:  # a candidate, kept by its re-check (the service's evaluator too)
                confirmed = evaluate(model, env_id, CONFIRM_EPISODES, episodes_seed + 50)
                best = confirmed if best is None else max(best, confirmed)
            out.write(json.dumps({"time": time.time(), "train_step": state["train_step"],
                                  "env_steps": state["env_steps"], "average_return": value,
                                  "confirmed_return": confirmed}) + "\n")
            out.flush()


def main() -> None:
    """Trains until the budget passes; an evaluator process scores a snapshot every --eval-every-s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget-s", type=float, default=5400.0)
    parser.add_argument("--eval-every-s", type=float, default=300.0)
    parser.add_argument("--out", required=True, help="JSON lines file to write")
    args = parser.parse_args()
    started = time.time()

    import multiprocessing
    import os
    import tempfile

    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"source": "rl-baselines3-zoo hyperparams/dqn.yml, atari", "seed": args.seed}) + "\n")
    work = tempfile.mkdtemp(prefix="sb3-atari-")
    snapshot, stop_path = os.path.join(work, "policy.pt"), os.path.join(work, "stop")
    scorer = multiprocessing.get_context("spawn").Process(
        target=evaluator, args=(args.env_id, args.seed, snapshot, args.out, stop_path), daemon=True)
    scorer.start()
    env = atari_env(args.env_id, args.seed)

    class Budget(BaseCallback):
        """Stops at the budget; hands the evaluator a policy snapshot every --eval-every-s."""

        def __init__(self):
            super().__init__()
            self.next_eval = started + args.eval_every_s

        def _on_step(self) -> bool:
            now = time.time()
            if now - started >= args.budget_s:
                return False
            if now >= self.next_eval:
                torch.save({"train_step": self.model._n_updates, "env_steps": self.num_timesteps,
                            "policy": self.model.policy.state_dict()}, snapshot + ".tmp")
                os.replace(snapshot + ".tmp", snapshot)  # the evaluator never reads half a file
                self.next_eval = now + args.eval_every_s
            return True

    model = DQN("CnnPolicy", env, learning_starts=ZOO_LEARNING_STARTS, seed=args.seed, verbose=0, **ZOO_ATARI)
    model.learn(total_timesteps=N_TIMESTEPS, callback=Budget())
    open(stop_path, "w").close()  # an evaluation under way finishes first: it scores weights of the budget
    scorer.join(timeout=900)


if __name__ == "__main__":
    main()
