"""The fair harness's evaluator: every snapshot of one finished training run, scored on the same fresh episodes.

One process per side and run, started by bench/fair_run.py after the run's training has ended (so it never competes
with training for the cores). Every side plays the same episode loop (`play`): one env per episode, reset with one
seed of `eval_seeds(n)` (the same list for every side, snapshot and sitting, far from any training seed), the greedy
action of the snapshot's Q-network at every step, to the env's registered episode limit (`episode_cap`). The
`random` side plays uniformly random actions on the same seeds: the baseline that says "below random play". The
`ours-kept` side replays the policy a service run kept and exported (its user's policy) on the same seeds.

    python bench/fair_eval.py --side ours --env-id CartPole-v1 --snapshots SNAP --run-dir ROOT --out scores.jsonl
    peers-venv/bin/python bench/fair_eval.py --side sb3 --env-id CartPole-v1 --snapshots SNAP --out scores.jsonl
    python bench/fair_eval.py --side random --env-id CartPole-v1 --out scores.jsonl
    python bench/fair_eval.py --side ours-kept --env-id CartPole-v1 --run-dir ROOT --out scores.jsonl

`ours` builds the Q-network from the run's recorded `<ROOT>/config.json` with the product code (`resolved_builder`,
the evaluator's greedy-policy network, `dqn.model.actions.greedy_actions`) and makes the env as the run's evaluator
does (`make_gym_env` with the run's evaluation options); `sb3` loads each `q_net` state into SB3's own DQN policy and
acts with `predict(deterministic=True)`. Only numpy and gymnasium are imported at the top, so the same file runs
under the service's virtualenv and the peer's. Appends one JSON line per snapshot to --out: the per-episode returns,
the snapshot's mark, train step and env steps, and `--context` (a JSON object: env, sitting, seed, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import gymnasium as gym
import numpy as np

#: The first evaluation seed. Training seeds are small (1-5, and the service's derived env seeds stay far below),
#: so a million up is fresh for every side.
EVAL_SEED_BASE = 1_000_000
EPISODES = 30


def eval_seeds(episodes: int = EPISODES) -> list[int]:
    """The shared evaluation seeds: one per episode, identical for every side, snapshot and sitting."""
    return [EVAL_SEED_BASE + index for index in range(episodes)]


def episode_cap(env_id: str) -> int:
    """The env's registered episode limit (what `gym.make` enforces for every side), 10,000 where it has none."""
    return gym.spec(env_id).max_episode_steps or 10_000


def play(env, act, seeds: list[int], cap: int) -> list[float]:
    """One episode per seed (env reset with it), actions from `act(observation, seed)`; the returns."""
    returns = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        total, steps, done = 0.0, 0, False
        while not done and steps < cap:
            observation, reward, terminated, truncated, _ = env.step(act(observation, seed))
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        returns.append(total)
    return returns


def read_marks(snapshots: str) -> list[dict]:
    """The snapshot records of a run (`marks.jsonl`: mark, seconds, train step, env steps, weights file)."""
    with open(os.path.join(snapshots, "marks.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def ours_policy(run_dir: str):
    """(env, load(mark) -> act) for the service's run: its recorded settings, its evaluation env and Q-network."""
    from dqn.envs.making import EnvOptions, make_gym_env
    from dqn.model.actions import greedy_actions
    from dqn.resolve import resolved_builder
    from dqn.settings.config import CommonConfig, LocalConfig
    from dqn.settings.loading import known_field_names, read_config_file, resolve

    config = resolve(CommonConfig, environ={}, file_values=read_config_file(os.path.join(run_dir, "config.json")),
                     known_names=known_field_names([LocalConfig]))
    builder = resolved_builder(config)
    network = builder.make_evaluation_policy()
    if not hasattr(network, "q_values"):
        raise SystemExit("fair_eval: recurrent Q-networks (lstm_size) are not supported by this harness")
    env = make_gym_env(config.env_id, EnvOptions.from_config(config).for_evaluation())

    def load(record: dict, snapshots: str):
        with np.load(os.path.join(snapshots, record["file"])) as saved:
            network.set_weights([saved[f"v{index}"] for index in range(len(saved.files))])
        return lambda observation, _seed: int(greedy_actions(network.q_values(np.asarray(observation)[None]))[0])

    return env, load


def sb3_policy(env_id: str, snapshots: str):
    """(env, load(mark) -> act) for an SB3 run: its recipe's network, each snapshot's q_net state, greedy predict."""
    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(1)
    with open(os.path.join(snapshots, "recipe.json"), encoding="utf-8") as handle:
        recipe = json.load(handle)
    env = gym.make(env_id)
    model = DQN(recipe["policy"], env, policy_kwargs=recipe.get("policy_kwargs"), buffer_size=1, device="cpu")

    def load(record: dict, directory: str):
        model.q_net.load_state_dict(torch.load(os.path.join(directory, record["file"]), weights_only=True))
        model.q_net_target.load_state_dict(model.q_net.state_dict())
        return lambda observation, _seed: int(model.predict(observation, deterministic=True)[0])

    return env, load


def kept_policy_returns(run_dir: str, seeds: list[int]) -> list[float] | None:
    """The returns of the policy the service's run kept and exported (what its user gets), on the shared seeds.

    The product's replay of an exported policy (`play_exported_policy`: env i reset with seed + i, so the same
    episodes as `play`); None where the run exported none.
    """
    from dqn.model.policy_export import play_exported_policy, run_env_options

    policy_dir = os.path.join(run_dir, "evaluator", "best_policy")
    if not os.path.isdir(policy_dir):
        return None
    env_id, options = run_env_options(policy_dir)
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError("the kept policy is replayed on consecutive seeds only")
    return [float(value) for value in play_exported_policy(policy_dir, env_id, len(seeds), seeds[0], options)]


def random_act(env):
    """Uniformly random actions, drawn from a generator seeded by the episode's seed (the same draws every time)."""
    generators: dict[int, np.random.Generator] = {}

    def act(_observation, seed: int) -> int:
        generator = generators.setdefault(seed, np.random.default_rng(seed))
        return int(generator.integers(env.action_space.n))

    return act


def main(argv: list[str] | None = None) -> None:
    """Scores every snapshot (or random play) and appends the rows to --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", required=True, choices=("ours", "ours-kept", "sb3", "random"))
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--snapshots", help="the run's snapshot directory (marks.jsonl and the weights files)")
    parser.add_argument("--run-dir", help="ours: the run's --root-dir (its recorded config.json)")
    parser.add_argument("--episodes", type=int, default=EPISODES)
    parser.add_argument("--context", default="{}", help="JSON object added to every row")
    parser.add_argument("--out", required=True, help="JSON lines file to append the rows to")
    args = parser.parse_args(argv)
    if args.side in ("ours", "sb3") and not args.snapshots:
        parser.error(f"--snapshots is required for --side {args.side}")
    if args.side in ("ours", "ours-kept") and not args.run_dir:
        parser.error(f"--run-dir is required for --side {args.side} (its config.json, its kept policy)")
    seeds, cap = eval_seeds(args.episodes), episode_cap(args.env_id)
    base = {"kind": "score", "env_id": args.env_id, "side": args.side, "eval_seed_first": seeds[0],
            "eval_episodes": len(seeds), "episode_cap": cap, **json.loads(args.context)}
    rows = []
    if args.side == "random":
        env = gym.make(args.env_id)
        rows.append({**base, "returns": play(env, random_act(env), seeds, cap)})
        env.close()
    elif args.side == "ours-kept":
        rows.append({**base, "returns": kept_policy_returns(args.run_dir, seeds)})
    else:
        env, load = ours_policy(args.run_dir) if args.side == "ours" else sb3_policy(args.env_id, args.snapshots)
        for record in read_marks(args.snapshots):
            if record["file"] is None:  # the run ended before it published any weights
                rows.append({**base, **record, "returns": None})
                continue
            started = time.perf_counter()
            returns = play(env, load(record, args.snapshots), seeds, cap)
            rows.append({**base, **{k: v for k, v in record.items() if k != "file"}, "returns": returns,
                         "eval_s": round(time.perf_counter() - started, 2)})
            print(f"{args.side} mark {record['mark_s']} s: train step {record['train_step']}, mean return "
                  f"{np.mean(returns):.1f}", flush=True)
        env.close()
    with open(args.out, "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"fair_eval: appended {len(rows)} rows to {args.out}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
