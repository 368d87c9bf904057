"""Breakout with the `breakout` preset: actor env steps/s, learner SGD steps/s, replay bytes per transition.

Run: python bench/breakout.py [--seconds 20] [--items 20000] [--num-envs 1,8]

Each part runs in a subprocess of its own against its own replay server (bench/common.py), so the actor
part uses one TF thread as the actor role does, and the learner part all cores as the learner role does.
- replay: fills the server with random-policy Breakout items through the actor's writer and divides the
  growth of the replay server's RSS by the items added after a warm-up fill; the same for CartPole, whose
  observations are 16 bytes, gives Reverb's own bookkeeping per item.
- actor: the `Actor` class (N envs, the conv collect policy at epsilon 1 -> decayed, one graph call per
  step, 2-step items written to the server) for a fixed time after published initial weights.
- learner: `DqnAgent.train` of the conv net, fixed batch and fed from replay, for each `--compute-dtypes`
  (bfloat16 runs natively on CPUs with AMX or AVX512-BF16) and each `--batch-sizes` (default: the preset's 32).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import fill_replay, replay_server  # noqa: E402

BREAKOUT_SERVER = ("--preset", "breakout", "--replay-min-size", "100")


def breakout_config(config_class, **overrides):
    """The breakout preset for `config_class`, with overrides (field -> value) and the auto settings decided."""
    from dqn.resolve import resolve_settings
    from dqn.settings.loading import resolve

    flags = {"preset": "breakout", **{k: str(v) for k, v in overrides.items()}}
    return resolve_settings(resolve(config_class, environ={}, flags=flags))


def replay_bytes(env_id: str, server_flags: tuple[str, ...], options, items: int) -> tuple[float, int]:
    """(RSS growth of the replay server per stored transition, transitions measured) after a warm-up fill.

    `items` counts transitions (fill_replay's unit); the table counts items of envs_per_item transitions each
    (the default config's, as the server runs without the flag), so its sizes are converted.
    """
    import psutil
    import reverb

    from dqn.replay_layout.items import REPLAY_TABLE, ItemShape
    from dqn.settings.config import CommonConfig

    warmup = max(min(1000, items), items // 5)
    with replay_server(*server_flags, "--replay-max-size", str(2 * (warmup + items))) as (address, pid):
        server, client = psutil.Process(pid), reverb.Client(address)

        def measure() -> tuple[int, int]:
            time.sleep(1.0)  # let the server settle its last inserts
            return server.memory_info().rss, client.server_info(timeout=30)[REPLAY_TABLE].current_size

        fill_replay(address, warmup, env_id=env_id, options=options, seed=1)
        rss_before, size_before = measure()
        fill_replay(address, items, env_id=env_id, options=options, seed=2)
        rss_after, size_after = measure()
    transitions = (size_after - size_before) * ItemShape.from_config(CommonConfig()).envs_per_item
    return (rss_after - rss_before) / transitions, transitions


def part_replay(args: argparse.Namespace) -> None:
    """Bytes per stored transition for Breakout (preset) and CartPole (Reverb's per-item bookkeeping)."""
    from dqn.envs.making import EnvOptions
    from dqn.settings.config import CommonConfig

    config = breakout_config(CommonConfig)
    breakout, count = replay_bytes(config.env_id, BREAKOUT_SERVER, EnvOptions.from_config(config), args.items)
    print(f"replay bytes/transition, Breakout (84x84x4 uint8 stacks): {breakout:8.0f}  "
          f"(RSS growth over {count} transitions; uncompressed stack = {84 * 84 * 4} bytes)", flush=True)
    cartpole, count = replay_bytes("CartPole-v1", ("--replay-min-size", "100"), EnvOptions(), args.items)
    print(f"replay bytes/transition, CartPole (16-byte observations):  {cartpole:8.0f}  "
          f"(RSS growth over {count} transitions: Reverb's bookkeeping)", flush=True)


def part_actor(args: argparse.Namespace) -> None:
    """Env steps/s of the Actor class with the conv collect policy, for each --num-envs."""
    import reverb

    from dqn.process.runtime import use_one_core

    use_one_core()  # as actor.collect.run does
    from actor.collect import Actor
    from dqn.process.runtime import StopSignal
    from dqn.remote.replay_client import ServerClients
    from dqn.remote.weights_wire import publish_weights
    from dqn.resolve import resolved_builder
    from dqn.settings.config import ActorConfig

    # One env per item, so that any --num-envs fits the server's item signature.
    with replay_server(*BREAKOUT_SERVER, "--replay-max-size", "1000000", "--envs-per-item", "1") as (address, _):
        client = reverb.Client(address)
        bundle = resolved_builder(breakout_config(ActorConfig, replay_address=address, envs_per_item=1)).agent
        publish_weights(client, [v.numpy() for v in bundle.policy_variables], 0)
        for num_envs in (int(n) for n in args.num_envs.split(",")):
            config = breakout_config(ActorConfig, replay_address=address, num_envs=num_envs, envs_per_item=1,
                                     warmup_steps=0, max_env_steps=1, summary_interval_s=3600)
            actor = Actor(config, ServerClients.at_one_address(client, address), StopSignal())
            actor.run()  # the first step: waits for the weights, traces the policy function
            start, steps = time.perf_counter(), actor.env_steps
            while time.perf_counter() - start < args.seconds:
                actor.step()
            rate = (actor.env_steps - steps) / (time.perf_counter() - start)
            actor.close()
            print(f"actor env steps/s, conv policy, {num_envs} envs, 1 TF thread: {rate:8.1f}  "
                  f"(= {4 * rate:,.0f} ALE frames/s)", flush=True)


def part_learner(args: argparse.Namespace) -> None:
    """SGD steps/s of the conv net, fixed batch and fed from replay, per batch size and compute dtype."""
    from tf_agents.utils import common

    from bench.common import make_dataset
    from bench.learner_throughput import rate as sgd_rate
    from dqn.envs.making import EnvOptions
    from dqn.resolve import resolved_builder
    from dqn.settings.config import LearnerConfig

    with replay_server(*BREAKOUT_SERVER, "--replay-max-size", "100000") as (address, _):
        preset = breakout_config(LearnerConfig)
        fill_replay(address, min(5000, args.items), env_id=preset.env_id, options=EnvOptions.from_config(preset))
        for batch_size in (int(size) for size in args.batch_sizes.split(",")):
            config = breakout_config(LearnerConfig, replay_address=address, batch_size=batch_size)
            iterator = iter(make_dataset(config))
            fixed, _ = next(iterator)
            for compute_dtype in args.compute_dtypes.split(","):
                bundle = resolved_builder(breakout_config(LearnerConfig, replay_address=address, batch_size=batch_size,
                                                    compute_dtype=compute_dtype)).agent
                train = common.function(bundle.agent.train)
                steps = (("fixed batch", lambda: train(fixed)),  # noqa: B023 - used within this iteration
                         ("fed from replay", lambda: train(next(iterator)[0])))  # noqa: B023
                for name, step in steps:
                    rate = sgd_rate(step, args.seconds)
                    print(f"learner SGD steps/s, conv net, {compute_dtype}, batch {batch_size}, {name}: "
                          f"{rate:8.1f}  (= {rate * batch_size:,.0f} transitions/s)", flush=True)


PARTS = {"replay": part_replay, "actor": part_actor, "learner": part_learner}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="measuring time per figure")
    parser.add_argument("--items", type=int, default=20_000,
                        help="transitions measured for bytes/transition (and, up to 5,000, the learner's replay)")
    parser.add_argument("--num-envs", default="1,8", help="actor env counts to measure")
    parser.add_argument("--part", default="all", help=f"all, or some of {','.join(PARTS)} (comma-separated)")
    parser.add_argument("--compute-dtypes", default="float32,bfloat16", help="learner part: compute dtypes to measure")
    parser.add_argument("--batch-sizes", default="32", help="learner part: batch sizes to measure")
    args = parser.parse_args()
    parts = list(PARTS) if args.part == "all" else args.part.split(",")
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown --part {sorted(unknown)}: all, or some of {','.join(PARTS)}")
    if args.part in PARTS:
        PARTS[args.part](args)
        return
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    for part in parts:  # one process per part: each gets the TF threading of the role it stands for
        command = [sys.executable, os.path.abspath(__file__), "--part", part, "--seconds", str(args.seconds),
                   "--items", str(args.items), "--num-envs", args.num_envs, "--compute-dtypes", args.compute_dtypes,
                   "--batch-sizes", args.batch_sizes]
        subprocess.run(command, check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


if __name__ == "__main__":
    main()
