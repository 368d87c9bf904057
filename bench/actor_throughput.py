"""Actor throughput on CartPole-v1: our actor vs. raw vector-env stepping vs. a stock TF-Agents actor.

For each num_envs, side by side in one run against one real replay server (no learner, no rate limiter):
  ceiling  raw gymnasium sync vector env (NEXT_STEP autoreset), random actions: env steps/s
  ours     `actor.collect.Actor` (collect policy on published weights, writes blocks of --envs-per-item envs):
           transitions landing in the replay table per second (server's insert count before/after, after a
           flush, times the envs per item); its policy runs in numpy (the default, dqn/model/numpy_policy.py)
  graph    the same Actor with --inference graph: the TF-Agents collect policy in one graph call per step
  stock    TF-Agents PyDriver + PyTFEagerPolicy(collect_policy) + ReverbAddTrajectoryObserver(2, stride 1)
           on one GymnasiumEnvironment: items landing in the table per second

Run: python bench/actor_throughput.py [--seconds 5] [--num-envs 16,32,64,128] [--envs-per-item 16]
     [--observation-history N] [--env-id ID --action-mask info|none]
     (the cost of a mask of valid actions: --env-id bench.masked_envs:MaskedCartPole-v0 with info against none)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import inserted, replay_server  # noqa: E402

#: The project's throughput goal for one actor process; the bench reports against it.
TARGET_STEPS_PER_SEC = 20_000


class Deadline:
    """Stands in for the actor's StopSignal: 'requested' once the time is up."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds
        self.signal_name = "deadline"

    @property
    def requested(self) -> bool:
        """True once the deadline passed."""
        return time.monotonic() >= self.end

    def wait(self, timeout_s: float) -> bool:
        """Sleeps up to timeout_s; True if the deadline passed."""
        time.sleep(max(0.0, min(timeout_s, self.end - time.monotonic())))
        return self.requested


def ceiling(env_id: str, num_envs: int, seconds: float) -> float:
    """Env steps/s of the raw gymnasium vector env the actor wraps, random actions."""
    import gymnasium as gym
    import numpy as np

    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP})
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    num_actions = int(env.single_action_space.n)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(rng.integers(0, num_actions, size=num_envs))
        steps += num_envs
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def ours(actor, client, seconds: float) -> tuple[float, float]:
    """(transitions landed in the table / s, env steps / s) of our Actor running its own loop for `seconds`.

    A block item holds envs_per_item transitions; the server counts items.
    """
    actor.stop = Deadline(seconds)
    before_items, before_steps, start = inserted(client), actor.env_steps, time.perf_counter()
    actor.run()
    actor.writer.flush(timeout_ms=60_000)  # count only items the server confirmed; the flush time counts too
    elapsed = time.perf_counter() - start
    transitions = (inserted(client) - before_items) * actor.config.envs_per_item
    return transitions / elapsed, (actor.env_steps - before_steps) / elapsed


def stock(env, policy, client, seconds: float) -> tuple[float, float]:
    """(items landed / s, env steps / s) of TF-Agents' own actor pieces on one env."""
    from tf_agents.drivers import py_driver
    from tf_agents.replay_buffers import reverb_utils

    from dqn.replay_layout.items import REPLAY_TABLE

    observer = reverb_utils.ReverbAddTrajectoryObserver(client, REPLAY_TABLE, sequence_length=2, stride_length=1)
    driver = py_driver.PyDriver(env, policy, [observer], max_steps=50)
    time_step = env.reset()
    before, steps, start = inserted(client), 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        time_step, _ = driver.run(time_step)
        steps += 50
    observer.flush()
    elapsed = time.perf_counter() - start
    items = inserted(client) - before
    observer.close()
    return items / elapsed, steps / elapsed


def make_actor(config, client, warmup_s: float):
    """Our Actor, warmed up: weights pulled, tf.function traced, warm-up steps done."""
    from actor.collect import Actor
    from dqn.remote.replay_client import ServerClients

    actor = Actor(config, ServerClients.at_one_address(client, config.replay_address), Deadline(0))
    actor.stop = Deadline(warmup_s)
    actor.run()  # waits for the published weights, then collects: traces the policy call
    return actor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time of each figure")
    parser.add_argument("--num-envs", default="16,32,64,128", help="comma-separated num_envs values, one row each")
    parser.add_argument("--envs-per-item", type=int, default=16, help="replay layout (1 = one env per item)")
    parser.add_argument("--stock-seconds", type=float, default=3.0, help="measuring time of the stock actor")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="each actor's run before it is measured")
    parser.add_argument("--td-error-priorities", action="store_true",
                        help="prioritized replay with the actor's own TD errors as initial priorities (the cost of "
                             "Ape-X's actor-side priorities)")
    parser.add_argument("--observation-history", type=int, default=1,
                        help="the service's --observation-history: the cost of stacking observations")
    parser.add_argument("--env-id", default="CartPole-v1", help="a Discrete env of two actions")
    parser.add_argument("--action-mask", default="none", choices=("info", "observation", "none"),
                        help="the service's --action-mask: the cost of a mask of valid actions")
    args = parser.parse_args()

    import reverb
    from tf_agents.policies import py_tf_eager_policy

    from dqn.process.runtime import use_one_core

    use_one_core()  # as actor.collect.run

    from bench.single_env import GymnasiumEnvironment
    from dqn.remote.weights_wire import publish_weights
    from dqn.resolve import resolved_builder
    from dqn.settings.config import ActorConfig

    root = tempfile.mkdtemp(prefix="bench-actor-")
    counts = [int(n) for n in args.num_envs.split(",")]
    variant = ("--prioritized-replay", "true", "--initial-priority", "td_error") if args.td_error_priorities else ()
    layout = ("--envs-per-item", str(args.envs_per_item), "--replay-min-size", str(args.envs_per_item))
    history = ("--observation-history", str(args.observation_history))
    env = ("--env-id", args.env_id, "--action-mask", args.action_mask)
    with replay_server("--replay-max-size", "1000000", *layout, *variant, *history, *env) as (address, _):
        client = reverb.Client(address)
        base = ActorConfig(root_dir=root, replay_address=address, warmup_steps=0, summary_interval_s=5.0,
                           prioritized_replay=args.td_error_priorities, envs_per_item=args.envs_per_item,
                           replay_min_size=args.envs_per_item,
                           initial_priority="td_error" if args.td_error_priorities else "max",
                           observation_history=args.observation_history, env_id=args.env_id,
                           action_mask=args.action_mask)
        builder = resolved_builder(base)
        base, bundle = builder.config, builder.agent  # auto settings decided once, as a run decides them
        publish_weights(client, [v.numpy() for v in bundle.policy_variables], train_step=0)
        stock_env = GymnasiumEnvironment(base.env_id, seed=0, options=builder.env_options)
        stock_policy = py_tf_eager_policy.PyTFEagerPolicy(bundle.agent.collect_policy, use_tf_function=True)
        print(f"{base.env_id}, Q-network {base.fc_layer_params}, {args.seconds:.0f} s per figure, "
              f"replay server at {address} (no learner, no rate limiter), {args.envs_per_item} env(s) per item")
        header = (f"{'num_envs':>8} {'ceiling steps/s':>15} {'ours trans/s':>12} {'ours steps/s':>12} "
                  f"{'graph trans/s':>13} {'stock items/s':>13} {'stock steps/s':>13} {'ours/ceiling':>12} "
                  f"{'ours/graph':>10} {'ours/stock':>10} {'ours/target':>11}")
        print(header)
        for num_envs in counts:
            config = dataclasses.replace(base, num_envs=num_envs, actor_id=num_envs)
            actor = make_actor(config, client, args.warmup_s)
            graph_actor = make_actor(dataclasses.replace(config, inference="graph", actor_id=num_envs + 1), client,
                                     args.warmup_s)
            if actor.policy.runs_in != "numpy" or graph_actor.policy.runs_in != "graph":
                raise SystemExit("expected numpy inference for 'ours' and a graph call for 'graph'")
            # Interleaved halves so a burst of load on the shared box hits every figure alike.
            raw, our, graph, theirs = (), (), (), ()
            for _ in range(2):
                raw += (ceiling(base.env_id, num_envs, args.seconds / 2),)
                our += (ours(actor, client, args.seconds / 2),)
                graph += (ours(graph_actor, client, args.seconds / 2),)
                theirs += (stock(stock_env, stock_policy, client, args.stock_seconds / 2),)
            actor.close()
            graph_actor.close()
            raw_rate = sum(raw) / 2
            our_items, our_steps = (sum(x) / 2 for x in zip(*our, strict=True))
            graph_items = sum(items for items, _ in graph) / 2
            stock_items, stock_steps = (sum(x) / 2 for x in zip(*theirs, strict=True))
            print(f"{num_envs:>8} {raw_rate:>15,.0f} {our_items:>12,.0f} {our_steps:>12,.0f} {graph_items:>13,.0f} "
                  f"{stock_items:>13,.0f} {stock_steps:>13,.0f} {our_items / raw_rate:>11.0%} "
                  f"{our_items / graph_items:>9.2f}x {our_items / stock_items:>9.0f}x "
                  f"{our_items / TARGET_STEPS_PER_SEC:>10.0%}", flush=True)
        stock_env.close()
    print(f"ratios use ours in transitions/s reaching the table (items x envs per item; stock: 1 per item); "
          f"target = {TARGET_STEPS_PER_SEC:,} env steps/s per actor process")


if __name__ == "__main__":
    main()
