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

#: rl-baselines3-zoo hyperparams/dqn.yml CartPole-v1: the zoo's entry for a small feature vector with two actions.
ZOO_CARTPOLE = dict(
    source="rl-baselines3-zoo hyperparams/dqn.yml, CartPole-v1", n_timesteps=50_000, policy="MlpPolicy",
    policy_kwargs=dict(net_arch=[256, 256]), learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
    learning_starts=1_000, gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
    exploration_fraction=0.16, exploration_final_eps=0.04)

#: rl-baselines3-zoo's MiniGrid recipe (flattened observation, MLP, 1e5 steps) with its tuned Acrobot-v1 DQN entry.
MINIGRID_RECIPE = dict(
    source="rl-baselines3-zoo: MiniGrid recipe (flattened observation, MLP, 1e5 steps) with the dqn.yml "
           "Acrobot-v1 entry", env_wrapper="flatten", n_timesteps=100_000, policy="MlpPolicy",
    policy_kwargs=dict(net_arch=[256, 256]), learning_rate=6.3e-4, batch_size=128, buffer_size=50_000,
    learning_starts=0, gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=-1,
    exploration_fraction=0.12, exploration_final_eps=0.1)

#: Published DQN settings per env id, with their source. `policy_kwargs` "minatar" is MinAtar's own network.
HYPERPARAMS = {
    # MinAtar's authors: examples/dqn.py of kenjyoung/MinAtar (Young & Tian 2019): batch 32, replay 100k, target
    # update every 1,000 steps, a train step every env step, 5M frames, epsilon 1 -> 0.1 over the first 100k
    # frames, replay start 5,000, RMSprop(lr 2.5e-4, alpha 0.95, eps 0.01, centered), gamma 0.99, Huber loss;
    # Q-network conv 16x3x3 stride 1 -> ReLU -> dense 128 -> ReLU -> actions.
    "bench.peer_envs:MinAtar/Breakout-v1": dict(
        source="MinAtar authors, examples/dqn.py", n_timesteps=5_000_000, policy="minatar",
        learning_rate=2.5e-4, buffer_size=100_000, learning_starts=5_000, batch_size=32, gamma=0.99,
        train_freq=1, gradient_steps=1, target_update_interval=1_000, exploration_initial_eps=1.0,
        exploration_final_eps=0.1, exploration_fraction=100_000 / 5_000_000, max_grad_norm=1e9),
    # highway-env's authors: README "Training" example / scripts/sb3_highway_dqn.py (highway-fast-v0, 2e4 steps);
    # exploration left at SB3's defaults there.
    "highway_env:highway-fast-v0": dict(
        source="highway-env authors, README / scripts/sb3_highway_dqn.py", n_timesteps=20_000, policy="MlpPolicy",
        policy_kwargs=dict(net_arch=[256, 256]), learning_rate=5e-4, buffer_size=15_000, learning_starts=200,
        batch_size=32, gamma=0.8, train_freq=1, gradient_steps=1, target_update_interval=50),
    # popgym's authors publish no DQN settings (their baselines are RLlib PPO with memory models): rl-baselines3-zoo
    # hyperparams/dqn.yml CartPole-v1, the env these observe positions of (the noisy one with noise added).
    "popgym:popgym-PositionOnlyCartPoleEasy-v0": ZOO_CARTPOLE,
    "popgym:popgym-PositionOnlyCartPoleHard-v0": ZOO_CARTPOLE,
    "popgym:popgym-NoisyPositionOnlyCartPoleEasy-v0": ZOO_CARTPOLE,
    # flappy-bird-gymnasium's authors publish no DQN settings for SB3 (their DQN example is their own code): the
    # zoo's CartPole-v1 entry, as for popgym.
    "bench.peer_envs:FlappyBird/Features-v0": ZOO_CARTPOLE,
    # MiniGrid's authors publish no DQN settings (their SB3 tutorial trains PPO), nor does the zoo; the zoo's
    # MiniGrid recipe (hyperparams/ppo.yml) flattens the observation for an MLP (its FlatObsWrapper; here
    # gymnasium's FlattenObservation, as the mission text is already filtered out) with a 1e5-step schedule for
    # DoorKey-5x5. SB3's MultiInputPolicy cannot take the Dict itself: it gives uint8 image parts its Nature CNN,
    # whose 8x8 kernel does not fit the 7x7 view. DQN settings: the zoo's tuned Acrobot-v1 entry, its tuned task
    # whose return improves only by reaching a goal sooner. The same recipe for MiniGrid's other rooms.
    "bench.peer_envs:MiniGrid/DoorKey-5x5-v0": MINIGRID_RECIPE,
    "bench.peer_envs:MiniGrid/Empty-Random-6x6-v0": MINIGRID_RECIPE,
    "bench.peer_envs:MiniGrid/LavaGapS5-v0": MINIGRID_RECIPE,
}


def make_env(env_id: str, seed: int | None = None):
    """`module:EnvId` as the service makes it, with the settings' `env_wrapper` ("flatten": one float vector).

    The service imports the module (it registers the id), then calls gymnasium.make.
    """
    import gymnasium as gym

    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    env = gym.make(name)
    if HYPERPARAMS.get(env_id, {}).get("env_wrapper") == "flatten":
        env = gym.wrappers.FlattenObservation(env)
    env.reset(seed=seed)
    return env


def minatar_policy_kwargs(env) -> dict:
    """MinAtar's Q-network: one 16-filter 3x3 conv over the channels-last bool grid, then dense 128."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class MinAtarConv(BaseFeaturesExtractor):
        def __init__(self, observation_space):
            height, width, channels = observation_space.shape
            super().__init__(observation_space, features_dim=16 * (height - 2) * (width - 2))
            self.conv = torch.nn.Sequential(torch.nn.Conv2d(channels, 16, 3, stride=1), torch.nn.ReLU(),
                                            torch.nn.Flatten())

        def forward(self, observations):
            return self.conv(observations.float().permute(0, 3, 1, 2))

    return dict(features_extractor_class=MinAtarConv, net_arch=[128], optimizer_class=torch.optim.RMSprop,
                optimizer_kwargs=dict(alpha=0.95, eps=0.01, centered=True))


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
    env = make_env(args.env_id)
    if policy == "minatar":
        policy, params["policy_kwargs"] = "MlpPolicy", minatar_policy_kwargs(env)
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
