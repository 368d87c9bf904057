"""The book's / notebook's single-process TF-Agents DQN loop on CartPole-v1, as the time-to-solve baseline.

One process: a Reverb server, PyDriver + PyTFEagerPolicy(collect policy) + ReverbAddTrajectoryObserver
(sequence_length 2) on one env, `as_dataset(sample_batch_size=64, num_steps=2, num_parallel_calls=3)
.prefetch(3)`, `common.function(agent.train)`, 4 collect steps per train step. The agent is built by
our `build_agent` with the same defaults as the service (observation scaling included), so only the
architecture differs. Greedy
evaluation (10 episodes) every `--eval-interval` train steps; stops when solved or out of time.

    python bench/book_loop.py --seed 1 --budget-s 120
    python bench/book_loop.py --seed 1 --budget-s 240 --eval-interval 250 --target 600   # trains on past a solve
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def run_book_loop(seed: int, budget_s: float, eval_interval: int = 100, target: float = 475.0,
                  max_train_steps: int = 0) -> dict:
    """Trains until the greedy average reaches `target` or `budget_s` passes (start-up included).

    `max_train_steps` (if > 0) ends it after that many train steps as well.
    """
    started = time.monotonic()
    import reverb
    from tf_agents.drivers import py_driver
    from tf_agents.policies import py_tf_eager_policy, random_tf_policy
    from tf_agents.replay_buffers import reverb_replay_buffer, reverb_utils
    from tf_agents.utils import common

    from bench.single_env import GymnasiumEnvironment
    from dqn.model.flat_weights import FlatWeights
    from dqn.model.schedules import epsilon_at
    from dqn.replay_layout.items import REPLAY_TABLE
    from dqn.resolve import resolved_builder
    from dqn.settings.config import LocalConfig
    from evaluator.evaluate import make_episodes

    # One env's trajectory per item, as the book's observer writes it (not the service's blocks of envs).
    config = LocalConfig(seed=seed, envs_per_item=1)
    builder = resolved_builder(config)
    config = builder.config  # auto settings decided, as a run decides them
    bundle = builder.agent
    agent = bundle.agent
    table = reverb.Table("replay", reverb.selectors.Uniform(), reverb.selectors.Fifo(), config.replay_max_size,
                         reverb.rate_limiters.MinSize(1), signature=builder.table_signatures()[REPLAY_TABLE])
    server = reverb.Server([table], port=None)
    buffer = reverb_replay_buffer.ReverbReplayBuffer(agent.collect_data_spec, "replay", sequence_length=2,
                                                     local_server=server)
    observer = reverb_utils.ReverbAddTrajectoryObserver(buffer.py_client, "replay", sequence_length=2)
    env = GymnasiumEnvironment(config.env_id, seed=seed)
    random_policy = py_tf_eager_policy.PyTFEagerPolicy(
        random_tf_policy.RandomTFPolicy(bundle.time_step_spec, bundle.action_spec), use_tf_function=True)
    collect_policy = py_tf_eager_policy.PyTFEagerPolicy(agent.collect_policy, use_tf_function=True)
    # The book warms up with a random policy, then collects 4 steps per train step.
    py_driver.PyDriver(env, random_policy, [observer], max_steps=config.replay_min_size).run(env.reset())
    driver = py_driver.PyDriver(env, collect_policy, [observer], max_steps=4)
    dataset = buffer.as_dataset(sample_batch_size=64, num_steps=2, num_parallel_calls=3).prefetch(3)
    iterator = iter(dataset)
    train = common.function(agent.train)
    episodes = make_episodes(dataclasses.replace(config, eval_episodes=10), builder)
    policy_weights = FlatWeights(bundle.policy_variables)
    time_step = env.reset()
    best, step, solved_at, evals = float("-inf"), 0, None, []
    while time.monotonic() - started < budget_s and not 0 < max_train_steps <= step:
        time_step, _ = driver.run(time_step)
        experience, _ = next(iterator)
        train(experience)
        step += 1
        if step % 50 == 0:
            bundle.epsilon.assign(epsilon_at(config, step))
        if step % eval_interval == 0:
            episodes.load(policy_weights.read())
            average = episodes.run(seed + 99_991)["average_return"]
            best = max(best, average)
            evals.append((step, round(float(average), 1)))
            if average >= target:
                solved_at = time.monotonic() - started
                break
    observer.close()
    server.stop()
    wall_time = solved_at if solved_at is not None else time.monotonic() - started
    return {"seed": seed, "solved": solved_at is not None, "wall_time_s": round(wall_time, 1),
            "train_steps": step, "best_eval_return": round(best, 1), "evals": evals}


def main() -> None:
    """Prints one JSON line per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget-s", type=float, default=120.0)
    parser.add_argument("--eval-interval", type=int, default=100, help="train steps between greedy evaluations")
    parser.add_argument("--target", type=float, default=475.0,
                        help="greedy average that ends the run; above the env's best return to train on past a solve")
    parser.add_argument("--max-train-steps", type=int, default=0, help="also stop after this many (0 = no limit)")
    args = parser.parse_args()
    print(json.dumps(run_book_loop(args.seed, args.budget_s, args.eval_interval, args.target, args.max_train_steps)),
          flush=True)


if __name__ == "__main__":
    main()
