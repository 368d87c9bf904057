"""Learner throughput: SGD steps/s fed from a replay server vs. the same train step on a fixed batch.

Run: python bench/learner_throughput.py [--seconds 15] [--envs-per-item 1,16] [--rounds 6]
     [--intra-op-threads 2 --inter-op-threads 2]   (threads other than the learner's auto choice)
     [--env-id ID --action-mask info|none]   (the cost of a mask of valid actions:
     --env-id bench.masked_envs:MaskedCartPole-v0 with info against none)

The headline ratio (the learner's default input against the same train step on a fixed batch, target 2) is
also measured interleaved: `--rounds` pairs of short windows, fixed and fed alternating which goes first, on the
last layout. This box's speed drifts by a third within minutes, so back-to-back 10 s figures can differ by that
much for reasons that have nothing to do with the input; the per-round ratios and their median do not.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
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


def fed_step_fn(config, builder, train_fn):
    """(step function, close) of the learner's own input path: batches staged in variables by its feed thread."""
    from dqn.replay_layout.dataset import sample_dataset
    from dqn.replay_layout.item_checks import item_problems
    from learner.staged_batches import StagedBatches
    from learner.staged_trainer import StagedTrainer

    # `config` may differ from the builder's in its input settings (pipeline, streams, steps per call). The feed
    # checks each batch's items as the learner's does.
    feed = StagedBatches(lambda: sample_dataset(config, builder.layout, builder.replay_item_step_spec),
                         builder.layout.finish_batch(),
                         check=lambda experience, _: item_problems(experience, builder.agent.action_spec))
    trainer = StagedTrainer(train_fn, feed.slots)

    def fed_step():
        index = feed.get(60)
        trainer.train(index)
        feed.release(index)

    return fed_step, feed.close


def interleaved_ratios(config, builder, train_fn, fixed_batch, args) -> list[tuple[float, float, float]]:
    """(fed / fixed, fed, fixed) SGD steps/s per round; the same train function, windows alternating first."""
    fed_step, close = fed_step_fn(config, builder, train_fn)
    fixed_step = lambda: train_fn(fixed_batch, None)  # noqa: E731 - the learner's train function on one batch
    rounds = []
    try:
        for index in range(args.rounds):
            order = (("fixed", fixed_step), ("fed", fed_step))
            rates = dict((name, rate(step, args.round_seconds)) for name, step in (order if index % 2 == 0
                                                                                  else order[::-1]))
            rounds.append((rates["fed"] / rates["fixed"], rates["fed"], rates["fixed"]))
    finally:
        close()
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--fc-layer-params", default="256,256", help="Q-network layers (the defaults: 256,256)")
    parser.add_argument("--envs-per-item", default="1,16",
                        help="replay layouts to feed from, each on its own server (1 = one env per item)")
    parser.add_argument("--rounds", type=int, default=6,
                        help="interleaved rounds of the headline ratio (0 = skip), each 2 x --round-seconds")
    parser.add_argument("--round-seconds", type=float, default=3.0)
    parser.add_argument("--fill", type=int, default=20_000, help="random-play transitions in each server before")
    parser.add_argument("--steps-per-call", default="2,4",
                        help="also run the train step N SGD steps per call (--train-steps-per-call), fixed and fed "
                             "by the learner's default input, on the last layout")
    from dqn.settings.config import LearnerConfig

    defaults = LearnerConfig()
    parser.add_argument("--intra-op-threads", type=int, default=defaults.intra_op_threads,
                        help="as the learner's flag; 0 = auto (the learner's default)")
    parser.add_argument("--inter-op-threads", type=int, default=defaults.inter_op_threads,
                        help="as the learner's flag; 0 = auto (the learner's default)")
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--action-mask", default="none", choices=("info", "observation", "none"),
                        help="the service's --action-mask: the cost of a mask of valid actions")
    args = parser.parse_args()

    import tensorflow as tf
    from tf_agents.utils import common

    # As learner.train.run does, before TF starts: the fixed and the fed step share these settings.
    intra, inter = dataclasses.replace(defaults, intra_op_threads=args.intra_op_threads,
                                       inter_op_threads=args.inter_op_threads).tf_threads()
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    print(f"TF threads: intra-op {intra}, inter-op {inter} (0 = TF's default)")

    from bench.common import make_dataset
    from dqn.envs.making import EnvOptions
    from dqn.resolve import resolved_builder
    from learner.train import make_train_fn

    layers = tuple(int(n) for n in args.fc_layer_params.split(","))
    results: dict[str, float] = {}
    pairs = []  # (fed, fixed) rows whose ratio is printed
    fixed_name = "tf.function train, fixed batch"

    def fed_rate(config, builder, train_fn) -> float:
        """SGD steps/s of the learner's own input path: batches staged in variables by its feed thread."""
        fed_step, close = fed_step_fn(config, builder, train_fn)
        try:
            return rate(fed_step, args.seconds, config.train_steps_per_call)
        finally:
            close()

    layouts = [int(n) for n in args.envs_per_item.split(",")]
    for envs in layouts:
        with replay_server("--replay-min-size", "100", "--envs-per-item", str(envs), "--env-id", args.env_id,
                           "--action-mask", args.action_mask) as (address, _):
            fill_replay(address, args.fill, num_envs=max(16, envs), envs_per_item=envs, env_id=args.env_id,
                        options=EnvOptions(action_mask=args.action_mask))
            config = LearnerConfig(replay_address=address, batch_size=args.batch_size, fc_layer_params=layers,
                                   envs_per_item=envs, env_id=args.env_id, action_mask=args.action_mask)
            builder = resolved_builder(config)
            bundle = builder.agent
            learner_train = make_train_fn(bundle, args.batch_size, 1)  # what the learner runs per staged batch
            if fixed_name not in results:
                fixed, _ = next(iter(make_dataset(config)))
                agent = bundle.agent
                train = common.function(agent.train)
                xla = tf.function(lambda experience: agent.train(experience).loss, jit_compile=True)  # noqa: B023
                results["agent.train eager, fixed batch"] = rate(lambda: agent.train(fixed), args.seconds / 2)  # noqa: B023
                results[fixed_name] = rate(lambda: train(fixed), args.seconds)  # noqa: B023
                results["tf.function train with XLA (jit_compile), fixed batch"] = rate(
                    lambda: xla(fixed), args.seconds)  # noqa: B023
            items = args.batch_size // envs
            for pipeline, streams in (("as_dataset", 3), ("streams", 1), ("streams", 2)):
                if streams > items or (pipeline == "streams" and items % streams):
                    continue
                variant = dataclasses.replace(config, replay_dataset=pipeline, num_parallel_calls=streams)
                name = (f"tf.function train, fed by {pipeline} ({streams} stream{'s' if streams > 1 else ''}), "
                        f"{envs} env{'s' if envs > 1 else ''}/item")
                results[name] = fed_rate(variant, builder, learner_train)
                pairs.append((name, fixed_name))
            if envs != layouts[-1]:
                continue
            if args.rounds:
                layout_batch, _ = next(iter(make_dataset(config)))  # this layout's sampled batch, kept
                interleaved = interleaved_ratios(config, builder, learner_train, layout_batch, args)
            # Several SGD steps per call, on the last layout's server.
            for steps in (int(n) for n in args.steps_per_call.split(",") if n):
                many = dataclasses.replace(config, train_steps_per_call=steps)
                train_many = make_train_fn(bundle, args.batch_size, steps)
                fixed_many, _ = next(iter(make_dataset(many)))
                fixed_steps = f"{steps} SGD steps per call, fixed batch"
                results[fixed_steps] = rate(lambda: train_many(fixed_many, None), args.seconds, steps)  # noqa: B023
                fed_steps = f"{steps} SGD steps per call, fed by the default input, {envs} envs/item"
                results[fed_steps] = fed_rate(many, builder, train_many)
                pairs.append((fed_steps, fixed_steps))
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:8.1f} SGD steps/s")
    for fed, fixed in pairs:
        print(f"ratio {fed.split('fed by ')[1]} / {fixed.split(', fixed')[0]}: {results[fed] / results[fixed]:.2f}")
    if args.rounds:
        ratios = sorted(r for r, _, _ in interleaved)
        print(f"interleaved, {args.rounds} rounds of {args.round_seconds:.0f} s + {args.round_seconds:.0f} s "
              f"(the default input vs the same train step on a fixed batch, {layouts[-1]} envs/item): per round "
              + ", ".join(f"{fed:.0f}/{fixed:.0f}={r:.2f}" for r, fed, fixed in interleaved)
              + f"; median ratio {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
