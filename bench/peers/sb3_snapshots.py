"""Stable-Baselines3 DQN for the fair harness: trains for a wall-clock budget, saving its q_net at the marks.

Runs under the peer virtualenv (never the service's), started by bench/fair_run.py:

    peers-venv/bin/python bench/peers/sb3_snapshots.py --env-id CartPole-v1 --seed 1 --budget-s 60 \
        --started-epoch EPOCH --marks 6 12 ... 60 --snapshots SNAP [--scaled-timesteps N]

The recipe is rl-baselines3-zoo's `hyperparams/dqn.yml` entry for the env (`ZOO`). `--scaled-timesteps N` is the
`sb3-scaled` side: the same recipe with n_timesteps = N (the env steps the published recipe reached in the same
budget on this box for the same seed, which bench/fair_run.py recorded), so epsilon's decay (exploration_fraction,
already a fraction of n_timesteps) and learning_starts (kept at the recipe's fraction of n_timesteps) fit the run.
Both sides train until the budget, past n_timesteps at the final epsilon. Nothing is evaluated here: at each mark
(seconds since --started-epoch, the harness's Popen) a callback saves `q_net`'s state (`mark-XX.pt`) and appends
{mark, mark_s, at_s, train_step (gradient updates), env_steps} to `marks.jsonl`; bench/fair_eval.py scores them later.
"""

from __future__ import annotations

import argparse
import json
import os
import time

#: rl-baselines3-zoo hyperparams/dqn.yml (DLR-RM/rl-baselines3-zoo at 22e3ff2, April 2026), its classic-control
#: entries as published.
ZOO = {
    "CartPole-v1": dict(n_timesteps=50_000, policy="MlpPolicy", learning_rate=2.3e-3, batch_size=64,
                        buffer_size=100_000, learning_starts=1_000, gamma=0.99, target_update_interval=10,
                        train_freq=256, gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                        policy_kwargs=dict(net_arch=[256, 256])),
    "MountainCar-v0": dict(n_timesteps=120_000, policy="MlpPolicy", learning_rate=4e-3, batch_size=128,
                           buffer_size=10_000, learning_starts=1_000, gamma=0.98, target_update_interval=600,
                           train_freq=16, gradient_steps=8, exploration_fraction=0.2, exploration_final_eps=0.07,
                           policy_kwargs=dict(net_arch=[256, 256])),
    "LunarLander-v3": dict(n_timesteps=100_000, policy="MlpPolicy", learning_rate=6.3e-4, batch_size=128,
                           buffer_size=50_000, learning_starts=0, gamma=0.99, target_update_interval=250,
                           train_freq=4, gradient_steps=-1, exploration_fraction=0.12, exploration_final_eps=0.1,
                           policy_kwargs=dict(net_arch=[256, 256])),
    "Acrobot-v1": dict(n_timesteps=100_000, policy="MlpPolicy", learning_rate=6.3e-4, batch_size=128,
                       buffer_size=50_000, learning_starts=0, gamma=0.99, target_update_interval=250,
                       train_freq=4, gradient_steps=-1, exploration_fraction=0.12, exploration_final_eps=0.1,
                       policy_kwargs=dict(net_arch=[256, 256])),
}


def recipe(env_id: str, scaled_timesteps: int | None = None) -> dict:
    """The zoo's entry; with `scaled_timesteps`, its schedule scaled to them (learning_starts at the same fraction)."""
    params = dict(ZOO[env_id])
    if scaled_timesteps:
        params["learning_starts"] = round(params["learning_starts"] * scaled_timesteps / params["n_timesteps"])
        params["n_timesteps"] = int(scaled_timesteps)
    return params


def main() -> None:
    """Trains until the budget passes, saving the q_net at each mark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", required=True, choices=sorted(ZOO))
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--budget-s", type=float, required=True)
    parser.add_argument("--started-epoch", type=float, required=True, help="the harness's Popen time (epoch s)")
    parser.add_argument("--marks", type=float, nargs="+", required=True, help="seconds since launch")
    parser.add_argument("--snapshots", required=True)
    parser.add_argument("--scaled-timesteps", type=int, default=None)
    args = parser.parse_args()

    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)  # one BLAS thread, as each of the service's roles
    params = recipe(args.env_id, args.scaled_timesteps)
    os.makedirs(args.snapshots, exist_ok=True)
    with open(os.path.join(args.snapshots, "recipe.json"), "w", encoding="utf-8") as handle:
        json.dump({"env_id": args.env_id, "scaled_timesteps": args.scaled_timesteps, **params}, handle)
    n_timesteps, policy = params.pop("n_timesteps"), params.pop("policy")
    marks = sorted(args.marks)
    log = open(os.path.join(args.snapshots, "marks.jsonl"), "a", encoding="utf-8")  # noqa: SIM115

    class Snapshots(BaseCallback):
        """Saves the q_net at every mark passed; stops the training at the budget."""

        def __init__(self):
            super().__init__()
            self.next = 0

        def save(self, index: int, now: float) -> None:
            name = f"mark-{index:02d}.pt"
            torch.save(self.model.q_net.state_dict(), os.path.join(args.snapshots, name))
            log.write(json.dumps({"mark": index, "mark_s": marks[index], "at_s": round(now - args.started_epoch, 2),
                                  "train_step": self.model._n_updates, "env_steps": self.num_timesteps,
                                  "exploration_rate": round(self.model.exploration_rate, 4), "file": name}) + "\n")
            log.flush()

        def _on_step(self) -> bool:
            now = time.time()
            while self.next < len(marks) and now - args.started_epoch >= marks[self.next]:
                self.save(self.next, now)
                self.next += 1
            return self.next < len(marks) and now - args.started_epoch < args.budget_s

    env = gym.make(args.env_id)
    model = DQN(policy, env, seed=args.seed, verbose=0, device="cpu", **params)
    callback = Snapshots()
    while callback.next < len(marks):
        model.learn(total_timesteps=n_timesteps, callback=callback, reset_num_timesteps=False)
    log.close()
    print(json.dumps({"env_steps": model.num_timesteps, "train_steps": model._n_updates}), flush=True)


if __name__ == "__main__":
    main()
