"""Stable-Baselines3 peers for the fair harness: train for a wall-clock budget, saving the policy at the marks.

Runs under the peer virtualenv (never the service's), started by bench/fair_run.py:

    peers-venv/bin/python bench/peers/sb3_snapshots.py --env-id CartPole-v1 --seed 1 --budget-s 60 \
        --started-epoch EPOCH --marks 6 12 ... 60 --snapshots SNAP [--scaled-timesteps N] [--algo dqn]

`--algo`:
- `dqn` (the `sb3` and `sb3-scaled` sides): SB3 DQN with rl-baselines3-zoo's `hyperparams/dqn.yml` entry for the env
  (`ZOO`), or for a peer-suite family the published settings of bench/peers/published.py (`PUBLISHED`: its
  authors' or the nearest published recipe, with its network, observation wrapper and the zoo's normalization).
  `--scaled-timesteps N` is the `sb3-scaled` side: the same recipe with n_timesteps = N (the env steps the
  published recipe reached in the same budget on this box for the same seed, which bench/fair_run.py recorded), so
  epsilon's decay (exploration_fraction, already a fraction of n_timesteps) and learning_starts (kept at the
  recipe's fraction of n_timesteps) fit the run.
- `dqn-flat` (the `sb3-dqn-flat` side): SB3 DQN on a MultiDiscrete env's combinations as one Discrete space
  (bench/action_kinds.py's `FlatActions`), with the zoo's entry for the env it discretises (`UNDERLYING` there:
  LunarLander-v3's for MultiDiscreteLunarLander-v3).
- `maskable-ppo` (the `maskable-ppo` side): sb3-contrib's MaskablePPO with its library defaults (`MlpPolicy`, i.e.
  MaskableActorCriticPolicy; learning_rate 3e-4, n_steps 2048, batch_size 64, n_epochs 10, gamma 0.99, gae_lambda
  0.95, clip_range 0.2, ent_coef 0, vf_coef 0.5, max_grad_norm 0.5; sb3-contrib 2.9.2). rl-baselines3-zoo (at
  22e3ff2) has no MaskablePPO entry at all (no ppo_mask hyperparameters, MaskablePPO not among its algorithms), and
  PettingZoo's own MaskablePPO example for Connect Four (tutorials/SB3/connect_four/sb3_connect_four_action_mask.py
  at 761353e) uses exactly these defaults: `MaskablePPO(MaskableActorCriticPolicy, env)`, the policy seeing the
  board without the mask, the mask given by `ActionMasker`. So here too: the observation's mask part is dropped
  (bench/action_kinds.py's `WithoutMask`) and `ActionMasker` reads the env's current mask (from the Dict
  observation or the info). Its defaults hold no schedule, so n_timesteps only bounds each `learn` call.

Every side trains until the budget, the DQN ones past n_timesteps at the final epsilon. Nothing is evaluated here:
at each mark (seconds since --started-epoch, the harness's Popen) a callback saves the policy's weights (DQN's
`q_net`, MaskablePPO's whole `policy`: `mark-XX.pt`) and appends {mark, mark_s, at_s, train_step (gradient updates),
env_steps, and with normalization the file of the running observation statistics at that mark} to `marks.jsonl`;
bench/fair_eval.py scores them later. The recipe is written to `recipe.json` first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)  # bench.peers.published, bench.action_kinds: run as a script under the peer virtualenv

from bench.peers.published import NEAREST, OBSERVATION_KEYS, PUBLISHED, sb3_arguments, wrap_env  # noqa: E402

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


#: For an env with no zoo entry: SB3 DQN's own library defaults (stable_baselines3 2.9.2 `DQN.__init__`). SB3 has no
#: default n_timesteps; 100k, the zoo's LunarLander and Acrobot entries' (CartPole's is 50k, MountainCar's 120k),
#: sets epsilon's decay to 10k env steps in `sb3` and lets `sb3-scaled` scale it to the budget like theirs.
SB3_DEFAULTS = dict(n_timesteps=100_000, policy="MlpPolicy", learning_rate=1e-4, buffer_size=1_000_000,
                    learning_starts=100, batch_size=32, tau=1.0, gamma=0.99, train_freq=4, gradient_steps=1,
                    target_update_interval=10_000, exploration_fraction=0.1, exploration_initial_eps=1.0,
                    exploration_final_eps=0.05)
#: The peer's settings sweep where no DQN recipe is published for an env, or only the nearest (`--recipe-of`): the three
#: distinct classic-control recipes (Acrobot's equals LunarLander's) and the library defaults, at most 4 settings.
NO_RECIPE_SWEEP = ("CartPole-v1", "MountainCar-v0", "LunarLander-v3", "sb3-defaults")
#: What a sitting can add to an env's own recipe (`--recipe-of`) where the recipe lacks what an SB3 user adds for
#: such an env: the zoo's `frame_stack` (the last observations stacked, zero-padded after a reset) for a partially
#: observed env, whose nearest recipe was made for an env that shows its whole state.
RECIPE_VARIANTS = {"frame-stack-2": dict(frame_stack=2), "frame-stack-4": dict(frame_stack=4)}

#: MaskablePPO's library defaults (every other argument left as sb3-contrib sets it); n_timesteps bounds a `learn`.
MASKABLE_PPO = dict(n_timesteps=1_000_000, policy="MlpPolicy")


def has_recipe(env_id: str) -> bool:
    """Whether a DQN recipe is published for the env: the zoo's (by EnvId) or a peer-suite family's (`PUBLISHED`)."""
    return env_id.rpartition(":")[2] in ZOO or env_id in PUBLISHED


def takes_sweep(env_id: str) -> bool:
    """Whether the env's peer may take a setting of NO_RECIPE_SWEEP: no recipe, or only the nearest (`NEAREST`)."""
    return not has_recipe(env_id) or env_id in NEAREST


def recipe(env_id: str, scaled_timesteps: int | None = None, algo: str = "dqn", recipe_of: str | None = None) -> dict:
    """The side's settings: the env's zoo or `PUBLISHED` DQN recipe (or its discretised env's), or MaskablePPO's.

    `recipe_of` (one of NO_RECIPE_SWEEP) lends an env that has no recipe, or only the nearest, the settings of one
    that has, or SB3's defaults; one of RECIPE_VARIANTS adds its keys to the env's own recipe. With
    `scaled_timesteps`, the DQN schedule is scaled to them (learning_starts at the same fraction).
    """
    if algo == "maskable-ppo":
        return dict(MASKABLE_PPO)
    name = env_id.rpartition(":")[2]
    if algo == "dqn-flat":
        from bench.action_kinds import UNDERLYING

        name = UNDERLYING.get(name, name)
    variant = {}
    if recipe_of in RECIPE_VARIANTS:
        if not has_recipe(env_id):
            raise SystemExit(f"sb3_snapshots: --recipe-of {recipe_of} changes an env's own recipe; {env_id} has none")
        variant, recipe_of = RECIPE_VARIANTS[recipe_of], None
    observed = {}
    if recipe_of is not None:
        if not takes_sweep(env_id) or recipe_of not in NO_RECIPE_SWEEP:
            raise SystemExit(f"sb3_snapshots: --recipe-of is for an env with no zoo recipe ({sorted(ZOO)} have one) "
                             f"or published one of its own ({sorted(set(PUBLISHED) - NEAREST)}) and takes one of "
                             f"{NO_RECIPE_SWEEP}; got {recipe_of} for {env_id}")
        # A nearest recipe's observation handling (MiniGrid's flattening and normalization) stays with its env.
        observed = {key: PUBLISHED[env_id][key] for key in OBSERVATION_KEYS if key in PUBLISHED.get(env_id, {})}
        name = recipe_of
    elif env_id in PUBLISHED:
        name = env_id
    elif name not in ZOO:
        raise SystemExit(f"sb3_snapshots: no rl-baselines3-zoo or published DQN recipe here for {env_id} (known: "
                         f"{sorted(ZOO)}, {sorted(PUBLISHED)}); "
                         f"give --recipe-of with one of {NO_RECIPE_SWEEP} (the documented sweep)")
    params = dict(SB3_DEFAULTS if name == "sb3-defaults" else PUBLISHED[name] if name in PUBLISHED else ZOO[name])
    params.update({**variant, **observed})
    if scaled_timesteps:
        params["learning_starts"] = round(params["learning_starts"] * scaled_timesteps / params["n_timesteps"])
        params["n_timesteps"] = int(scaled_timesteps)
    return params


def make_model(algo: str, env_id: str, seed: int, params: dict):
    """(model, the module of it whose weights are saved) for `algo` on its env (bench/action_kinds.py's `peer_env`)."""
    from bench.action_kinds import legal_actions, peer_env

    env = wrap_env(peer_env(env_id, algo, params.get("make_kwargs")), params)
    if algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO
        from sb3_contrib.common.wrappers import ActionMasker

        model = MaskablePPO(params.pop("policy"), ActionMasker(env, legal_actions), seed=seed, verbose=0,
                            device="cpu", **params)
        return model, model.policy
    from stable_baselines3 import DQN

    if params.get("normalize"):  # as the zoo's `normalize: true` (its gamma the recipe's)
        from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

        env = VecNormalize(DummyVecEnv([lambda: env]), gamma=params["gamma"])
    model = DQN(env=env, seed=seed, verbose=0, device="cpu", **sb3_arguments(params))
    return model, model.q_net


def main() -> None:
    """Trains until the budget passes, saving the policy at each mark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", required=True, help="a gymnasium id (`module:EnvId` for bench/action_kinds.py's)")
    parser.add_argument("--algo", choices=("dqn", "dqn-flat", "maskable-ppo"), default="dqn")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--budget-s", type=float, required=True)
    parser.add_argument("--started-epoch", type=float, required=True, help="the harness's Popen time (epoch s)")
    parser.add_argument("--marks", type=float, nargs="+", required=True, help="seconds since launch")
    parser.add_argument("--snapshots", required=True)
    parser.add_argument("--scaled-timesteps", type=int, default=None)
    parser.add_argument("--recipe-of", default=None,
                        help=f"for an env with no recipe of its own: one of {NO_RECIPE_SWEEP}; for one with a "
                             f"recipe: one of {sorted(RECIPE_VARIANTS)}")
    args = parser.parse_args()

    import numpy as np
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    params = recipe(args.env_id, args.scaled_timesteps, args.algo, args.recipe_of)
    if params.get("torch_threads", 1):  # one BLAS thread, as each of the service's roles, unless the recipe says
        torch.set_num_threads(params.get("torch_threads", 1))
    os.makedirs(args.snapshots, exist_ok=True)
    with open(os.path.join(args.snapshots, "recipe.json"), "w", encoding="utf-8") as handle:
        json.dump({"env_id": args.env_id, "algo": args.algo, "scaled_timesteps": args.scaled_timesteps,
                   "recipe_of": args.recipe_of, **params},
                  handle)
    n_timesteps = params.pop("n_timesteps")
    marks = sorted(args.marks)
    log = open(os.path.join(args.snapshots, "marks.jsonl"), "a", encoding="utf-8")  # noqa: SIM115

    class Snapshots(BaseCallback):
        """Saves the policy's weights at every mark passed; stops the training at the budget."""

        def __init__(self):
            super().__init__()
            self.next = 0

        def save(self, index: int, now: float) -> None:
            name = f"mark-{index:02d}.pt"
            torch.save(saved.state_dict(), os.path.join(args.snapshots, name))
            exploration = getattr(self.model, "exploration_rate", None)
            scaling = self.model.get_vec_normalize_env()
            statistics = None
            if scaling is not None:  # the running observation statistics the policy acts on at this mark
                statistics = f"mark-{index:02d}-obs.npz"
                np.savez(os.path.join(args.snapshots, statistics), mean=scaling.obs_rms.mean, var=scaling.obs_rms.var)
            log.write(json.dumps({"mark": index, "mark_s": marks[index], "at_s": round(now - args.started_epoch, 2),
                                  "train_step": self.model._n_updates, "env_steps": self.num_timesteps,
                                  "exploration_rate": None if exploration is None else round(exploration, 4),
                                  "file": name, "observation_statistics": statistics}) + "\n")
            log.flush()

        def _on_step(self) -> bool:
            now = time.time()
            while self.next < len(marks) and now - args.started_epoch >= marks[self.next]:
                self.save(self.next, now)
                self.next += 1
            return self.next < len(marks) and now - args.started_epoch < args.budget_s

    model, saved = make_model(args.algo, args.env_id, args.seed, params)
    callback = Snapshots()
    while callback.next < len(marks):
        model.learn(total_timesteps=n_timesteps, callback=callback, reset_num_timesteps=False)
    log.close()
    print(json.dumps({"env_steps": model.num_timesteps, "train_steps": model._n_updates}), flush=True)


if __name__ == "__main__":
    main()
