"""The fair harness's evaluator: every snapshot of one finished training run, scored on the same fresh episodes.

One process per side and run, started by bench/fair_run.py after the run's training has ended (so it never competes
with training for the cores). Every side plays the same episode loop (`play`): one env per episode, reset with one
seed of `eval_seeds(n)` (the same list for every side, snapshot and sitting, far from any training seed), the greedy
action of the snapshot's policy at every step, to the env's registered episode limit (Atari: Nature DQN's protocol,
epsilon 0.05 and 18,000 frames; `protocol`). The episodes
run side by side; the service's side makes one Q-network call for all those still playing (a call costs about as
much for 30 observations as for one), SB3's sides one `predict` likewise. The `random`
side plays uniformly random actions on the same seeds (uniform over the valid ones where the env gives a mask): the
baseline that says "below random play". The `ours-kept` side replays the policy a service run kept and exported
(its user's policy) on the same seeds.

    python bench/fair_eval.py --side ours --env-id CartPole-v1 --snapshots SNAP --run-dir ROOT --out scores.jsonl
    peers-venv/bin/python bench/fair_eval.py --side sb3 --env-id CartPole-v1 --snapshots SNAP --out scores.jsonl
    peers-venv/bin/python bench/fair_eval.py --side maskable-ppo --env-id Taxi-v4 --snapshots SNAP --out scores.jsonl
    python bench/fair_eval.py --side random --env-id CartPole-v1 --out scores.jsonl
    python bench/fair_eval.py --side ours-kept --env-id CartPole-v1 --run-dir ROOT --out scores.jsonl

`ours` builds the Q-network from the run's recorded `<ROOT>/config.json` with the product code (`resolved_builder`,
the evaluator's greedy-policy network, the run's `ValidActions`: greedy among the actions its mask allows, where the
run reads one) and makes the env as the run's evaluator does (its evaluation options and wrappers); `sb3` loads each
`q_net` state into SB3's own DQN policy (the recipe's network and observation wrapper; over `FlatActions` for the
flat side) and acts with `predict(deterministic=True)`, on observations scaled by the mark's running statistics
where the recipe normalizes them (bench/peers/published.py); `maskable-ppo` loads each policy state into
MaskablePPO and acts with `predict(deterministic=True, action_masks=...)` given the env's current mask. Only numpy
and gymnasium are imported at the top, so the same file runs under the service's virtualenv and the peer's.

Illegal actions: every side plays through bench/action_kinds.py's `CountIllegal`, beneath its own wrappers, which
counts the actions the env's own mask forbade (Taxi allows them; Connect Four ends the game on one). Each row holds
`illegal_actions`, one count per episode, None where the env gives no mask. The kept policy is replayed by the
product through an id whose envs are counted the same way.

Appends one JSON line per snapshot to --out: the per-episode returns, the snapshot's mark, train step and env steps,
and `--context` (a JSON object: env, sitting, seed, side, ...).
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
#: Atari's protocol for every side, as the service's evaluator (Nature DQN): epsilon 0.05 and at most 18,000 frames
#: (4,500 agent steps at frame skip 4). Played greedily, a policy that never presses FIRE after a lost life stalls.
ATARI_EPSILON, ATARI_CAP, FRAME_SKIP = 0.05, 4_500, 4
#: Tell the draws of evaluation epsilon and of the random player apart from the env's own generator for a seed.
EPSILON_STREAM, RANDOM_PLAYER_STREAM = 0xE95, 0x5EED


def eval_seeds(episodes: int = EPISODES) -> list[int]:
    """The shared evaluation seeds: one per episode, identical for every side, snapshot and sitting."""
    return [EVAL_SEED_BASE + index for index in range(episodes)]


def protocol(env_id: str) -> tuple[float, int]:
    """(epsilon, episode cap): Atari's (`ATARI_EPSILON`, `ATARI_CAP`); else greedy to the env's registered limit.

    Where the env registers no limit, 10,000 agent steps.
    """
    from bench.action_kinds import bare_id
    from dqn.envs.atari import is_atari

    if is_atari(bare_id(env_id)):
        return ATARI_EPSILON, ATARI_CAP
    return 0.0, gym.spec(bare_id(env_id)).max_episode_steps or 10_000


def illegal_so_far() -> int:
    """Illegal actions counted in this process so far (bench/action_kinds.py's `CountIllegal`)."""
    from bench.action_kinds import CountIllegal

    return CountIllegal.illegal_total


def play(make_env, act, seeds: list[int], cap: int, epsilon: float = 0.0) -> tuple[list[float], list[int] | None]:
    """One episode per seed, side by side: env i made by `make_env()` and reset with seeds[i].

    `act(envs, observations, indices)` gives the actions of the envs `indices` (those still playing) at their
    `observations`; with probability `epsilon` a uniformly random action replaces it (drawn from a stream of the
    episode's seed, the same for every side). (returns, illegal actions per episode or None where the env gave no
    mask); each env plays through `CountIllegal`, which counts its own.
    """
    envs = [make_env() for _ in seeds]
    observations = [env.reset(seed=seed)[0] for env, seed in zip(envs, seeds, strict=True)]
    masked = any(env.get_wrapper_attr("legal") is not None for env in envs)  # both conventions show it at a reset
    returns, steps, playing = [0.0] * len(envs), [0] * len(envs), list(range(len(envs)))
    explore = [np.random.default_rng([EPSILON_STREAM, seed]) for seed in seeds]
    while playing and cap > 0:
        actions = act(envs, [observations[index] for index in playing], playing)
        still = []
        for index, action in zip(playing, actions, strict=True):
            if epsilon and explore[index].random() < epsilon:
                action = random_action(envs[index], explore[index])
            observations[index], reward, terminated, truncated, _ = envs[index].step(action)
            returns[index] += float(reward)
            steps[index] += 1
            if not (terminated or truncated) and steps[index] < cap:
                still.append(index)
        playing = still
    illegal = [env.get_wrapper_attr("illegal") for env in envs]
    for env in envs:
        env.close()
    return returns, illegal if masked else None


def stacked(observations: list):
    """The observations of several envs as one batch (a Dict's parts stacked part by part)."""
    if isinstance(observations[0], dict):
        return {key: np.stack([np.asarray(one[key]) for one in observations]) for key in observations[0]}
    return np.stack([np.asarray(one) for one in observations])


def read_marks(snapshots: str) -> list[dict]:
    """The snapshot records of a run (`marks.jsonl`: mark, seconds, train step, env steps, weights file)."""
    with open(os.path.join(snapshots, "marks.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def ours_env(run_dir: str):
    """(make_env, convert, builder) of the service's run: its recorded settings and evaluation env.

    The env is made as `make_gym_env` makes it (gym.make, then the run's wrappers), with `CountIllegal` between
    the two; `convert` gives a batch of its observations the dtypes the vector env hands the policy.
    """
    from bench.action_kinds import CountIllegal
    from dqn.envs.atari import is_atari
    from dqn.envs.making import env_wrappers, gym_make_kwargs
    from dqn.envs.spaces import observation_converter
    from dqn.resolve import resolved_builder
    from dqn.settings.config import CommonConfig, LocalConfig
    from dqn.settings.loading import known_field_names, read_config_file, resolve

    config = resolve(CommonConfig, environ={}, file_values=read_config_file(os.path.join(run_dir, "config.json")),
                     known_names=known_field_names([LocalConfig]))
    builder = resolved_builder(config)
    options = builder.env_options.for_evaluation()
    game = (options.atari_repeat_action_probability, options.atari_frame_skip)
    if is_atari(config.env_id) and game != (atari_game(config.env_id)["repeat_action_probability"], FRAME_SKIP):
        raise SystemExit(f"fair_eval: the run played {config.env_id} with sticky actions {game[0]} and frame skip "
                         f"{game[1]}; the peers and random play use {atari_game(config.env_id)} and frame skip "
                         f"{FRAME_SKIP} (--preset breakout-small plays their game)")

    def make_env():
        env = CountIllegal(gym.make(config.env_id, **gym_make_kwargs(config.env_id, options, {})))
        for wrapper in env_wrappers(config.env_id, options):
            env = wrapper(env)
        return env

    return make_env, observation_converter(builder.observation_spec), builder


def ours_policy(run_dir: str):
    """(make_env, load(mark) -> act) for the service's run: its evaluation env (`ours_env`) and Q-network.

    Actions are the greedy ones among those the run's mask allows (`ValidActions`, as its evaluator).
    """
    make_env, convert, builder = ours_env(run_dir)
    network, valid = builder.make_evaluation_policy(), builder.agent.valid_actions
    if not hasattr(network, "q_values"):
        raise SystemExit("fair_eval: recurrent Q-networks (lstm_size) are not supported by this harness")

    def act(envs, observations: list, _indices):
        # Padded to one batch size for every call: a graph network (conv, Dict) traces one graph per size.
        observation = convert(stacked(observations + observations[:1] * (len(envs) - len(observations))))
        chosen = valid.greedy(network.q_values(valid.network_observation(observation)), valid.mask(observation))
        return chosen[:len(observations)]

    def load(record: dict, snapshots: str):
        with np.load(os.path.join(snapshots, record["file"])) as saved:
            network.set_weights([saved[f"v{index}"] for index in range(len(saved.files))])
        return act

    return make_env, load


def sb3_policy(env_id: str, snapshots: str):
    """(make_env, load(mark) -> act) for an SB3 run: its recipe's network and env, each snapshot's weights, greedy.

    DQN (flat or not): the q_net state, acting on observations scaled by the mark's running statistics where the
    recipe normalizes them; MaskablePPO: the policy's state, predicting among the env's valid actions.
    """
    import torch

    from bench.action_kinds import legal_actions, peer_env
    from bench.peers.published import normalized, sb3_arguments, wrap_env

    torch.set_num_threads(1)
    with open(os.path.join(snapshots, "recipe.json"), encoding="utf-8") as handle:
        recipe = json.load(handle)
    algo = recipe.get("algo", "dqn")
    env = wrap_env(peer_env(env_id, algo, recipe.get("make_kwargs")), recipe, evaluation=True)
    statistics: dict = {}  # the loaded mark's running observation statistics, where the recipe normalizes
    if algo == "maskable-ppo":
        from sb3_contrib import MaskablePPO

        model = MaskablePPO(recipe["policy"], env, policy_kwargs=recipe.get("policy_kwargs"), device="cpu")
        module = model.policy
    else:
        from stable_baselines3 import DQN

        network = sb3_arguments(recipe)
        model = DQN(network["policy"], env, policy_kwargs=network.get("policy_kwargs"), buffer_size=1, device="cpu")
        module = model.q_net

    def act(envs, observations: list, indices):
        observation = stacked(observations)
        if algo == "maskable-ppo":
            masks = np.stack([legal_actions(envs[index]) for index in indices])
            return [int(a) for a in model.predict(observation, deterministic=True, action_masks=masks)[0]]
        if statistics:
            observation = normalized(observation, statistics["mean"], statistics["var"])
        return [int(a) for a in model.predict(observation, deterministic=True)[0]]

    def load(record: dict, directory: str):
        module.load_state_dict(torch.load(os.path.join(directory, record["file"]), weights_only=True))
        if record.get("observation_statistics"):
            with np.load(os.path.join(directory, record["observation_statistics"])) as saved:
                statistics.update(mean=saved["mean"], var=saved["var"])
        if algo != "maskable-ppo":
            model.q_net_target.load_state_dict(model.q_net.state_dict())
        return act

    return lambda: wrap_env(peer_env(env_id, algo, recipe.get("make_kwargs")), recipe, evaluation=True), load


def kept_policy_returns(run_dir: str, seeds: list[int]) -> tuple[list[float] | None, int | None]:
    """(returns, illegal actions in all) of the policy a service run kept and exported, on the shared seeds.

    What its user gets. The product's replay of an exported policy (`play_exported_policy`: env i reset with
    seed + i, so the same episodes as `play`), its envs made from an id that counts illegal actions as `play` does
    (None, None) where the run exported none. Atari ids are played here instead, with their protocol's epsilon and
    cap (the exported policy's actions at the run's evaluation env).
    """
    from bench.action_kinds import CountIllegal, counted_id
    from dqn.envs.atari import is_atari
    from dqn.model.policy_export import play_exported_policy, run_env_options

    policy_dir = os.path.join(run_dir, "evaluator", "best_policy")
    if not os.path.isdir(policy_dir):
        return None, None
    env_id, options = run_env_options(policy_dir)
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError("the kept policy is replayed on consecutive seeds only")
    if is_atari(env_id):  # Atari's protocol (`protocol`), which the product's greedy replay does not play
        make_env, convert, _ = ours_env(run_dir)
        epsilon, cap = protocol(env_id)
        return play(make_env, saved_policy_act(policy_dir, convert), seeds, cap, epsilon)[0], None
    before = illegal_so_far()
    returns, _ = play_exported_policy(policy_dir, counted_id(env_id), len(seeds), seeds[0], options)
    return [float(value) for value in returns], illegal_so_far() - before if CountIllegal.masks_seen else None


def saved_policy_act(policy_dir: str, convert):
    """`play`'s act for an exported (stateless) policy: its action at each batch of observations."""
    import tensorflow as tf
    from tf_agents.trajectories import time_step as ts

    policy = tf.saved_model.load(policy_dir)

    def act(_envs, observations: list, _indices):
        count = len(observations)
        step = ts.TimeStep(step_type=tf.fill([count], ts.StepType.MID), reward=tf.zeros([count]),
                           discount=tf.ones([count]), observation=tf.nest.map_structure(
                               tf.constant, convert(stacked(observations))))
        return list(policy.action(step, ()).action.numpy())

    return act


def random_action(env, generator: np.random.Generator):
    """A uniformly random action of `env` (over the valid ones where it gives a mask; each MultiDiscrete dimension)."""
    if isinstance(env.action_space, gym.spaces.MultiDiscrete):
        return generator.integers(env.action_space.nvec)
    legal = env.get_wrapper_attr("legal")
    if legal is not None:
        return int(generator.choice(np.flatnonzero(legal)))
    return int(generator.integers(env.action_space.n))


def random_act(seeds: list[int]):
    """Uniformly random actions for `play` on `seeds`, from a generator seeded by the episode's seed (same draws).

    The draws come from a stream apart from the env's own: `default_rng(seed)` is the very generator
    `reset(seed=seed)` gives the env, and an env that draws from it while stepping (an opponent's moves) would
    mirror the player.
    """
    generators = [np.random.default_rng([RANDOM_PLAYER_STREAM, seed]) for seed in seeds]

    def act(envs, _observations, indices):
        return [random_action(envs[index], generators[index]) for index in indices]

    return act


def random_play_env(env_id: str):
    """The env random play is scored on: as made, or for Atari the game both sides' wrappers play.

    That is the peers' game (bench/peers/published.py) behind gymnasium's AtariPreprocessing: no-op starts, 4 frames
    per action.
    """
    from bench.action_kinds import CountIllegal
    from dqn.envs.atari import is_atari

    if not is_atari(env_id):
        return CountIllegal(gym.make(env_id))
    game = gym.make(env_id, **atari_game(env_id))
    return gym.wrappers.AtariPreprocessing(CountIllegal(game), noop_max=30, frame_skip=FRAME_SKIP)


def atari_game(env_id: str) -> dict:
    """gym.make's arguments of the Atari game the peers play (bench/peers/published.py), which every side plays."""
    from bench.peers.published import PUBLISHED

    if env_id not in PUBLISHED:
        raise SystemExit(f"fair_eval: no peer recipe names the game of {env_id}; known: {sorted(PUBLISHED)}")
    return PUBLISHED[env_id]["make_kwargs"]


def main(argv: list[str] | None = None) -> None:
    """Scores every snapshot (or random play) and appends the rows to --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", required=True, choices=("ours", "ours-kept", "sb3", "maskable-ppo", "random"))
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--snapshots", help="the run's snapshot directory (marks.jsonl and the weights files)")
    parser.add_argument("--run-dir", help="ours: the run's --root-dir (its recorded config.json)")
    parser.add_argument("--episodes", type=int, default=EPISODES)
    parser.add_argument("--context", default="{}", help="JSON object added to every row")
    parser.add_argument("--out", required=True, help="JSON lines file to append the rows to")
    args = parser.parse_args(argv)
    if args.side in ("ours", "sb3", "maskable-ppo") and not args.snapshots:
        parser.error(f"--snapshots is required for --side {args.side}")
    if args.side in ("ours", "ours-kept") and not args.run_dir:
        parser.error(f"--run-dir is required for --side {args.side} (its config.json, its kept policy)")
    seeds, (epsilon, cap) = eval_seeds(args.episodes), protocol(args.env_id)
    base = {"kind": "score", "env_id": args.env_id, "side": args.side, "eval_seed_first": seeds[0],
            "eval_episodes": len(seeds), "episode_cap": cap, "eval_epsilon": epsilon, **json.loads(args.context)}
    rows = []
    if args.side == "random":
        from bench.fair_sides import RANDOM_DRAWS

        returns, illegal = play(lambda: random_play_env(args.env_id), random_act(seeds), seeds, cap)
        rows.append({**base, "returns": returns, "illegal_actions": illegal, "draws": RANDOM_DRAWS})
    elif args.side == "ours-kept":
        returns, illegal = kept_policy_returns(args.run_dir, seeds)
        rows.append({**base, "returns": returns, "illegal_actions_total": illegal})
    else:
        make_env, load = ours_policy(args.run_dir) if args.side == "ours" else sb3_policy(args.env_id, args.snapshots)
        for record in read_marks(args.snapshots):
            if record["file"] is None:  # the run ended before it published any weights
                rows.append({**base, **record, "returns": None})
                continue
            started = time.perf_counter()
            returns, illegal = play(make_env, load(record, args.snapshots), seeds, cap, epsilon)
            rows.append({**base, **{k: v for k, v in record.items() if k != "file"}, "returns": returns,
                         "illegal_actions": illegal, "eval_s": round(time.perf_counter() - started, 2)})
            print(f"{args.side} mark {record['mark_s']} s: train step {record['train_step']}, mean return "
                  f"{np.mean(returns):.1f}", flush=True)
    with open(args.out, "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"fair_eval: appended {len(rows)} rows to {args.out}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
