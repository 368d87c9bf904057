"""Cost of one Breakout evaluation of a policy that never serves the ball, under each evaluation protocol.

An early DQN policy often settles on NOOP and never presses FIRE; evaluated greedily, each episode then waits out
the training cap (the preset's 27,000 agent steps). This times the evaluator's own loop (`make_episodes`, the
preset's conv network and `eval_episodes`) on such weights: greedy with the training cap, and the Atari protocol
(epsilon 0.05, 4,500 agent steps). CPU seconds of this process are printed beside wall seconds: on a shared
machine they are the comparable figure.

    python bench/eval_protocol.py [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def time_evaluation(seed: int, **overrides) -> dict:
    """One evaluation of never-FIRE weights with the breakout preset plus `overrides`: seconds, return, length."""
    import numpy as np

    from dqn.process.runtime import use_one_core
    from dqn.resolve import resolved_builder
    from dqn.settings.config import EvaluatorConfig
    from dqn.settings.loading import resolve
    from evaluator.evaluate import make_episodes

    use_one_core()  # as the evaluator role
    config = resolve(EvaluatorConfig, environ={}, flags={"preset": "breakout", **overrides})
    builder = resolved_builder(config)
    config = builder.config  # auto settings decided, as a run decides them
    bundle = builder.agent
    weights = [np.zeros(v.shape, np.float32) for v in bundle.policy_variables]
    weights[-1] = np.array([1.0, 0.0, 0.0, 0.0], np.float32)  # Q = output bias: NOOP always looks best
    episodes = make_episodes(config, builder)
    episodes.load(weights)
    started, started_cpu = time.perf_counter(), time.process_time()
    values = episodes.run(seed)  # {metric name: value}, as the evaluator records them
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
    episodes.close()
    return {"overrides": overrides, "seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1),
            **values, "episodes": config.eval_episodes}


def main() -> None:
    """Prints one JSON line per protocol."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--episodes", type=int, help="episodes per evaluation (default: the preset's)")
    parser.add_argument("--max-episode-steps", type=int, help="a cap below both protocols' own (a short run)")
    args = parser.parse_args()
    shared = {"eval_episodes": str(args.episodes)} if args.episodes else {}
    for overrides in ({"eval_epsilon": "0", "eval_max_episode_steps": "27000"}, {}):
        if args.max_episode_steps:
            overrides = {**overrides, "eval_max_episode_steps": str(args.max_episode_steps)}
        print(json.dumps(time_evaluation(args.seed, **shared, **overrides)), flush=True)


if __name__ == "__main__":
    main()
