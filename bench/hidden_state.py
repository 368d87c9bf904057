"""What `--observation-history` auto sees in each env: the share of the next change left unexplained, and its pick.

For each env and seed, the service's own probe (dqn/envs/hidden_state.py) plays seeded random steps and fits its
two regressions; this prints both unexplained shares (without and with the previous observation), their drop, the
history auto picks, and the probe's wall time. Fully observed envs should show no drop; envs whose observation
leaves out velocities a large one.

Run: python bench/hidden_state.py [--envs ID ...] [--seeds 0 1 2]
(popgym ids need `pip install popgym`; Flappy Bird and MinAtar the bench-envs extra, as bench/peer_envs.py says)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dqn.envs.hidden_state import MIN_TRANSITIONS, history_for, played_transitions, unexplained_change  # noqa: E402
from dqn.envs.making import EnvOptions, env_specs  # noqa: E402

ENVS = ["CartPole-v1", "MountainCar-v0", "Acrobot-v1", "LunarLander-v3", "bench.peer_envs:FlappyBird/Features-v0",
        "popgym:popgym-NoisyPositionOnlyCartPoleEasy-v0", "bench.pomdp_envs:CartPoleNoVelocity-v0",
        "popgym:popgym-PositionOnlyCartPoleEasy-v0"]


def main(argv: list[str] | None = None) -> None:
    """Prints one row per env and seed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    options = EnvOptions()
    print(f"{'env':48} seed  unexplained without / with previous   drop   auto  probe s  transitions")
    for env_id in args.envs:
        _, action, _, _ = env_specs(env_id, options)
        for seed in args.seeds:
            started = time.perf_counter()
            transitions = played_transitions(env_id, options, call_limit_s=20.0, seed=seed)
            count = 0 if transitions is None else len(transitions[0])
            if count < MIN_TRANSITIONS:
                print(f"{env_id:48} {seed:4}  fewer than {MIN_TRANSITIONS} transitions: auto 1")
                continue
            without, with_previous = unexplained_change(*transitions, num_actions=int(action.maximum) + 1 -
                                                        int(action.minimum), action_minimum=int(action.minimum))
            seconds = time.perf_counter() - started
            history = history_for(without, with_previous)
            print(f"{env_id:48} {seed:4}  {100 * without:16.1f} % / {100 * with_previous:5.1f} %"
                  f"        {100 * (without - with_previous):5.1f}  {history:4}  {seconds:7.2f}  {count:11}")


if __name__ == "__main__":
    main()
