"""What `--action-gap-alpha` auto sees in each env: per action, the share of random-play steps that change nothing.

For each env and seed, the service's own probe (dqn/envs/idle_actions.py) plays seeded random steps and counts, per
action, the steps that leave the observation unchanged, earn 0 and do not end the episode. It prints the largest
share, the actions at or above the threshold, the alpha auto picks and the probe's wall time. Envs whose useless
actions leave the greedy policy standing still (MiniGrid's rooms) should show shares near 1; the others far below.

Run: python bench/idle_actions.py [--envs ID ...] [--seeds 0 1 2]
(MiniGrid, MinAtar, Flappy Bird and highway ids need the bench-envs extra, popgym `pip install popgym`, as
bench/peer_envs.py says)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dqn.envs.idle_actions import IDLE_SHARE, alpha_for, idle_shares  # noqa: E402
from dqn.envs.making import EnvOptions  # noqa: E402

ENVS = ["CartPole-v1", "MountainCar-v0", "Acrobot-v1", "LunarLander-v3", "FrozenLake-v1", "Taxi-v4",
        "CliffWalking-v1", "bench.peer_envs:FlappyBird/Features-v0", "bench.peer_envs:MinAtar/Breakout-v1",
        "bench.peer_envs:MinAtar/Freeway-v1", "bench.peer_envs:MinAtar/SpaceInvaders-v1",
        "bench.peer_envs:MinAtar/Asterix-v1", "bench.peer_envs:MinAtar/Seaquest-v1",
        "popgym:popgym-PositionOnlyCartPoleEasy-v0", "highway_env:highway-fast-v0",
        "bench.peer_envs:MiniGrid/Empty-Random-6x6-v0", "bench.peer_envs:MiniGrid/DoorKey-5x5-v0"]


def main(argv: list[str] | None = None) -> None:
    """Prints one row per env and seed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    print(f"{'env':48} seed  largest idle share  idle actions  auto alpha  probe s")
    for env_id in args.envs:
        for seed in args.seeds:
            started = time.perf_counter()
            try:
                shares = idle_shares(env_id, EnvOptions(), call_limit_s=20.0, seed=seed)
            except Exception as error:  # noqa: BLE001 - an env missing from this box: say so, go on
                print(f"{env_id:48} {seed:4}  {type(error).__name__}: {error}"[:160])
                break
            seconds = time.perf_counter() - started
            idle = [action for action, share in shares.items() if share >= IDLE_SHARE]
            largest = max(shares.values(), default=0.0)
            print(f"{env_id:48} {seed:4}  {100 * largest:16.1f} %  {','.join(map(str, idle)) or '-':>12}"
                  f"  {alpha_for(shares):10g}  {seconds:7.2f}")


if __name__ == "__main__":
    main()
