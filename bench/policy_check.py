"""Average return of an exported greedy policy (a SavedModel) on new episodes: does a solve hold up?

The evaluator decides "solved" on the same 10 start states every time, so a policy can pass on those and
fail elsewhere. This replays the exported policy on `--episodes` other start states (seeded apart from the
evaluator's) and prints one JSON line: mean, median and minimum return.

    python bench/policy_check.py runs/cartpole/evaluator/best_policy --episodes 50
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def check_policy(policy_dir: str, env_id: str, episodes: int, seed: int) -> dict:
    """Runs one greedy episode per env of the SavedModel policy in `policy_dir`; returns the return statistics."""
    import numpy as np
    import tensorflow as tf
    from tf_agents.trajectories import time_step as ts

    from dqn.envs import GymnasiumVectorEnvironment

    policy = tf.saved_model.load(policy_dir)
    env = GymnasiumVectorEnvironment(env_id, episodes, seed=seed)
    step, state = env.reset(), policy.get_initial_state(episodes)  # a stateful (RNN) policy carries its state
    returns = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    while running.any():
        policy_step = policy.action(tf.nest.map_structure(tf.constant, step), state)
        step, state = env.step(policy_step.action.numpy()), policy_step.state
        returns += np.where(running, step.reward, 0.0)
        running &= step.step_type != ts.StepType.LAST
    env.close()
    return {"episodes": episodes, "seed": seed, "mean_return": float(returns.mean()),
            "median_return": float(np.median(returns)), "min_return": float(returns.min())}


def main() -> None:
    """Prints the statistics as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy_dir")
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=12_345, help="env i starts from seed + i (the evaluator uses "
                                                                 "seed + 99,991 of the run)")
    args = parser.parse_args()
    result = check_policy(args.policy_dir, args.env_id, args.episodes, args.seed)
    print(json.dumps({**result, "mean_return": round(result["mean_return"], 1)}), flush=True)


if __name__ == "__main__":
    main()
