"""Learner throughput: SGD steps/s fed from a replay server vs. the same train step on a fixed batch.

Run: python bench/learner_throughput.py [--seconds 15] [--envs-per-item 1,16]
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
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--fc-layer-params", default="256,256", help="Q-network layers (the defaults: 256,256)")
    parser.add_argument("--envs-per-item", default="1,16",
                        help="replay layouts to feed from, each on its own server (1 = one env per item)")
    args = parser.parse_args()

    from tf_agents.utils import common

    from dqn.agent import build_agent
    from dqn.config import LearnerConfig
    from learner.feed import StagedBatches
    from learner.train import StagedTrainer, make_dataset, make_train_fn

    layers = tuple(int(n) for n in args.fc_layer_params.split(","))
    results: dict[str, float] = {}
    fed_names, fixed_name = [], "tf.function train, fixed batch"
    for envs in (int(n) for n in args.envs_per_item.split(",")):
        with replay_server("--replay-min-size", "100", "--envs-per-item", str(envs)) as (address, _):
            fill_replay(address, 20_000, num_envs=max(16, envs), envs_per_item=envs)
            config = LearnerConfig(replay_address=address, batch_size=args.batch_size, fc_layer_params=layers,
                                   envs_per_item=envs)
            bundle = build_agent(config)
            train = common.function(bundle.agent.train)
            learner_train = make_train_fn(bundle, args.batch_size, 1)  # what the learner runs per staged batch
            if fixed_name not in results:
                fixed, _ = next(iter(make_dataset(config, bundle)))
                eager = bundle.agent.train
                results["agent.train eager, fixed batch"] = rate(lambda: eager(fixed), args.seconds / 2)  # noqa: B023
                results[fixed_name] = rate(lambda: train(fixed), args.seconds)  # noqa: B023
            items = args.batch_size // envs
            for pipeline, streams in (("as_dataset", 3), ("streams", 1), ("streams", 2)):
                if streams > items or (pipeline == "streams" and items % streams):
                    continue
                variant = dataclasses.replace(config, replay_dataset=pipeline, num_parallel_calls=streams)
                # The learner's own input path: batches staged in variables by its feed thread (learner/feed.py).
                feed = StagedBatches(lambda variant=variant, bundle=bundle: make_dataset(variant, bundle))
                trainer = StagedTrainer(learner_train, feed.slots)

                def fed_step(feed=feed, trainer=trainer):
                    index = feed.get(60)
                    trainer.train(index)
                    feed.release(index)

                name = (f"tf.function train, fed by {pipeline} ({streams} stream{'s' if streams > 1 else ''}), "
                        f"{envs} env{'s' if envs > 1 else ''}/item")
                results[name] = rate(fed_step, args.seconds)
                fed_names.append(name)
                feed.close()
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:8.1f} SGD steps/s")
    for name in fed_names:
        print(f"ratio {name.split('fed by ')[1]} / fixed batch: {results[name] / results[fixed_name]:.2f}")


if __name__ == "__main__":
    main()
