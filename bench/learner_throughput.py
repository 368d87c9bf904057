"""Learner throughput: SGD steps/s fed from a replay server vs. the same train step on a fixed batch.

Run: python bench/learner_throughput.py [--seconds 15]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import fill_replay, replay_server  # noqa: E402


def rate(step_fn, seconds: float, steps_per_call: int = 1) -> float:
    """Calls step_fn for about `seconds` (after 3 warm-up calls); returns SGD steps/s."""
    for _ in range(3):
        step_fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step_fn()
        calls += 1
    return calls * steps_per_call / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--fc-layer-params", default="64,64", help="Q-network layers (README figures: 64,64)")
    args = parser.parse_args()

    import tensorflow as tf
    from tf_agents.utils import common

    from dqn.agent import build_agent
    from dqn.config import LearnerConfig
    from learner.train import make_dataset

    with replay_server("--replay-min-size", "100") as (address, _):
        fill_replay(address, 20_000)
        layers = tuple(int(n) for n in args.fc_layer_params.split(","))
        config = LearnerConfig(replay_address=address, batch_size=args.batch_size, fc_layer_params=layers)
        bundle = build_agent(config)
        iterator = iter(make_dataset(config, bundle))
        fixed, _ = next(iterator)
        train = common.function(bundle.agent.train)
        eager, fixed_name = "agent.train eager, fixed batch", "tf.function train, fixed batch"
        results = {eager: rate(lambda: bundle.agent.train(fixed), args.seconds / 2),
                   fixed_name: rate(lambda: train(fixed), args.seconds)}
        fed_names = []
        for pipeline, streams in (("as_dataset", 3), ("streams", 1), ("streams", 2)):
            variant = dataclasses.replace(config, replay_dataset=pipeline, num_parallel_calls=streams)
            feed = iter(make_dataset(variant, bundle))
            name = f"tf.function train, fed by {pipeline} ({streams} stream{'s' if streams > 1 else ''})"
            results[name] = rate(lambda feed=feed: train(next(feed)[0]), args.seconds)
            fed_names.append(name)
            del feed
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:8.1f} SGD steps/s")
    for name in fed_names:
        print(f"ratio {name.split('fed by ')[1]} / fixed batch: {results[name] / results[fixed_name]:.2f}")
    del tf


if __name__ == "__main__":
    main()
