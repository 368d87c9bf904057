"""Learner SGD steps/s against the size of the Q-network's output: the flat head and the branching heads.

The size rule of multi-discrete actions (dqn/envs/action_spaces.py) follows from this: a flat head has one Q-value
per combination, a branching network D x n_max; both sit on the default torso (fc_layer_params 256,256) and train
on the default batch (256 transitions) through the learner's own train function, on a fixed batch of zeros (the
values do not change a dense step's cost). Sizes run in interleaved rounds, so a drift of this box's speed spreads
over all of them; the figure per size is the median over rounds.

Run: python bench/action_heads.py [--flat 4,16,64,256,1024,4096] [--branching 4x4,4x16,4x64,16x64,4x256]
     [--seconds 3] [--rounds 3] [--batch-size 256] [--fc-layer-params 256,256]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train_function(kind: str, size: str, batch_size: int, fc_layers: tuple[int, ...]):
    """A zero-argument SGD step of an agent whose Q-network has `kind` ("flat" or "branching") output `size`."""
    import numpy as np
    import tensorflow as tf
    from tf_agents.specs import array_spec

    from dqn.model.agent import build_agent
    from dqn.settings.config import LearnerConfig
    from learner.train import make_train_fn

    config = LearnerConfig(observation_history=1, image_encoding="scaled", samples_per_insert=4.0,
                           action_mask="none", fc_layer_params=fc_layers)
    observation = array_spec.BoundedArraySpec((16,), np.float32, -1.0, 1.0, name="observation")
    if kind == "flat":
        action = array_spec.BoundedArraySpec((), np.int64, 0, int(size) - 1, name="action")
    else:
        dims, values = (int(part) for part in size.split("x"))
        action = array_spec.BoundedArraySpec((dims,), np.int64, 0, np.full(dims, values - 1), name="action")
    bundle = build_agent(config, observation, action)
    batch = tf.nest.map_structure(lambda spec: tf.zeros((batch_size, 2, *spec.shape), spec.dtype),
                                  bundle.agent.collect_data_spec)
    train = make_train_fn(bundle, batch_size, 1)
    return lambda: train(batch, None)


def rate(step, seconds: float) -> float:
    """SGD steps/s of `step` over about `seconds`, after 3 warm-up calls."""
    for _ in range(3):
        step()
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        step()
        calls += 1
    return calls / (time.perf_counter() - started)


def outputs(kind: str, size: str) -> int:
    """Q-values per observation of a head."""
    if kind == "flat":
        return int(size)
    dims, values = (int(part) for part in size.split("x"))
    return dims * values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flat", default="4,16,64,256,1024,4096", help="flat heads: actions, comma-separated")
    parser.add_argument("--branching", default="4x4,4x16,4x64,16x64,4x256",
                        help="branching heads: DIMSxVALUES, comma-separated")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per figure per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--fc-layer-params", default="256,256")
    args = parser.parse_args(argv)

    import tensorflow as tf

    from dqn.settings.config import LearnerConfig

    # The learner's own threads on this machine (its auto choice).
    intra, inter = LearnerConfig().tf_threads()
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    fc_layers = tuple(int(units) for units in args.fc_layer_params.split(","))
    heads = [("flat", size) for size in args.flat.split(",") if size] + \
            [("branching", size) for size in args.branching.split(",") if size]
    steps = {head: train_function(*head, args.batch_size, fc_layers) for head in heads}
    rates: dict[tuple[str, str], list[float]] = {head: [] for head in heads}
    for round_index in range(args.rounds):
        order = heads if round_index % 2 == 0 else heads[::-1]
        for head in order:
            rates[head].append(rate(steps[head], args.seconds))
    print(f"learner SGD steps/s, batch {args.batch_size}, torso {args.fc_layer_params}, {args.rounds} interleaved "
          f"rounds of {args.seconds:g} s (median; per round in brackets)")
    print(f"{'head':<10} {'size':>8} {'outputs':>8} {'SGD steps/s':>12}  rounds")
    for kind, size in heads:
        values = rates[(kind, size)]
        median = statistics.median(values) if values else float("nan")
        shown = ", ".join(f"{value:.0f}" for value in values)
        print(f"{kind:<10} {size:>8} {outputs(kind, size):>8} {median:>12.1f}  [{shown}]")


if __name__ == "__main__":
    main()
