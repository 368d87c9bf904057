"""A/B of plain DQN's target max: TF-Agents' DqnAgent (two target passes a train step) against PlainDqnAgent (one).

The learner's own train function (`learner.train.make_train_fn`) on one fixed batch of each setting, TF threads as
the learner sets them. Each measurement is a process of its own (one agent per process, as in a learner), old and
new alternating which goes first in each round; the box's speed drifts within minutes, so the per-round ratios and
their median are the figures to read. Run from a checkout that has PlainDqnAgent:

    PYTHONPATH=. python bench/results/2026-11-30-one-pass-target/ab.py --rounds 4 --seconds 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

SETTINGS = {
    "CartPole-v1 (256x256 MLP, batch 256)": {"env_id": "CartPole-v1"},
    "MinAtar Breakout (the default conv net, batch 256)": {"env_id": "bench.peer_envs:MinAtar/Breakout-v1"},
    "Breakout, --preset breakout-small (Nature CNN, batch 32)": {"preset": "breakout-small"},
}


def measure(setting: str, old: bool, seconds: float) -> float:
    """SGD steps/s of one side's train function in this process."""
    import tensorflow as tf

    # As the learner sets them (learner/train.py: `tf_threads()` of its config, (1, 4) on this box), before any op.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(4)
    from tf_agents.agents.dqn import dqn_agent
    from tf_agents.specs import tensor_spec

    import bench.peer_envs  # noqa: F401 - registers MinAtar/Breakout-v1
    import dqn.model.agent as agent_module
    from dqn.resolve import resolved_builder
    from dqn.settings.config import LearnerConfig
    from dqn.settings.loading import resolve
    from learner.train import make_train_fn

    config = resolve(LearnerConfig, flags=SETTINGS[setting], environ={})
    if old:  # built as before PlainDqnAgent existed: `agent_class` names TF-Agents' DqnAgent instead
        agent_module.PlainDqnAgent = dqn_agent.DqnAgent
    bundle = resolved_builder(config).agent
    assert type(bundle.agent).__name__ == ("DqnAgent" if old else "PlainDqnAgent"), type(bundle.agent)
    size = config.train_batch_size()  # batch_size 0 is auto: the learner's batch
    batch = tensor_spec.sample_spec_nest(bundle.agent.training_data_spec, outer_dims=(size, 2), seed=1)
    observation = tf.nest.map_structure(  # order-1 features (CartPole's Box is unbounded); images as sampled
        lambda part: tf.random.stateless_uniform(part.shape, seed=(4, 5), minval=-1, maxval=1, dtype=part.dtype)
        if part.dtype.is_floating else part, batch.observation)
    batch = batch._replace(observation=observation, step_type=tf.ones_like(batch.step_type),
                           next_step_type=tf.ones_like(batch.next_step_type),
                           discount=tf.ones_like(batch.discount),
                           reward=tf.random.stateless_uniform(batch.reward.shape, seed=(2, 3), minval=-1, maxval=1))
    train = make_train_fn(bundle, size, 1)
    for _ in range(5):  # traced and warm
        train(batch, None)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        train(batch, None)
        calls += 1
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--one", nargs=2, metavar=("SETTING", "SIDE"), help="(internal) one measurement")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1] == "old", args.seconds)))
        return
    for setting in SETTINGS:
        rates: dict[str, list[float]] = {"old": [], "new": []}
        for index in range(args.rounds):
            for side in ("old", "new") if index % 2 == 0 else ("new", "old"):
                command = [sys.executable, __file__, "--one", setting, side, "--seconds", str(args.seconds)]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                rates[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
        ratios = [new / old for old, new in zip(rates["old"], rates["new"], strict=True)]
        print(json.dumps({"setting": setting, "old_sgd_steps_per_s": [round(r, 1) for r in rates["old"]],
                          "new_sgd_steps_per_s": [round(r, 1) for r in rates["new"]],
                          "ratios_new_over_old": [round(r, 3) for r in ratios],
                          "median_ratio": round(statistics.median(ratios), 3)}), flush=True)


if __name__ == "__main__":
    main()
