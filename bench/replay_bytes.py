"""Bytes per stored transition by observation kind: observations sit in replay in their own dtype.

For each env, a fresh replay server (that env's table signature, default block layout) is warmed up with
`--warmup` transitions written through the actor's writer, then `--transitions` more; the server's RSS growth over
those, divided by their number, is printed beside the raw size of one observation. Kinds:
  float vector  CartPole-v1: 4 float32
  bool grid     a 10x10x4 bool grid of object channels (MinAtar-sized), stored as uint8
  uint8 image   ALE/Breakout-v5 with the Atari preprocessing: an 84x84x4 uint8 frame stack

A replay item holds L = 2 steps of a block of envs, so each observation is stored twice (as the first and the
second step of overlapping items) unless Reverb's chunks share it: the ratio to the raw size says which.

Run: python bench/replay_bytes.py [--transitions 20000] [--warmup 5000] [--kinds float,bool,image]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import fill_replay, inserted, replay_server  # noqa: E402


class RandomBoolGrid(gym.Env):
    """A 10x10x4 bool grid with a few random cells set each step (the shape of MinAtar's observations)."""

    observation_space = gym.spaces.Box(0, 1, (10, 10, 4), np.bool_)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        """A random grid."""
        super().reset(seed=seed)
        return self._grid(), {}

    def step(self, action):
        """Another random grid; episodes of 100 steps."""
        return self._grid(), 0.0, False, False, {}

    def _grid(self) -> np.ndarray:
        return self.np_random.random((10, 10, 4)) < 0.05


if "RandomBoolGrid-v0" not in gym.registry:
    gym.register("RandomBoolGrid-v0", entry_point=RandomBoolGrid, max_episode_steps=100)

#: kind -> (env id, raw bytes of one observation as the env makes it)
KINDS = {"float": ("CartPole-v1", 4 * 4), "bool": ("bench.replay_bytes:RandomBoolGrid-v0", 10 * 10 * 4),
         "image": ("ALE/Breakout-v5", 84 * 84 * 4)}


def bytes_per_transition(env_id: str, transitions: int, warmup: int) -> tuple[float, str]:
    """(server RSS bytes per stored transition, the observation's stored dtype) for `env_id`."""
    import psutil
    import reverb

    from dqn.envs.making import EnvOptions, env_specs
    from dqn.replay_layout.items import ItemShape
    from dqn.settings.config import CommonConfig

    envs_per_item = ItemShape.from_config(CommonConfig()).envs_per_item
    options = EnvOptions()
    stored_dtype = env_specs(env_id, options)[0].dtype
    with replay_server("--env-id", env_id, "--replay-max-size", str(2 * (transitions + warmup)),
                       "--replay-min-size", "16") as (address, server_pid):
        server = psutil.Process(server_pid)
        fill_replay(address, warmup, env_id=env_id, options=options)
        client = reverb.Client(address)
        time.sleep(1.0)
        base_rss, base_items = server.memory_info().rss, inserted(client)
        fill_replay(address, transitions, env_id=env_id, options=options, seed=1)
        time.sleep(1.0)
        stored = (inserted(client) - base_items) * envs_per_item
        return (server.memory_info().rss - base_rss) / stored, str(np.dtype(stored_dtype))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transitions", type=int, default=20_000, help="transitions measured per kind")
    parser.add_argument("--warmup", type=int, default=5_000, help="transitions written before measuring")
    parser.add_argument("--kinds", default="float,bool,image", help=f"comma-separated, of {','.join(KINDS)}")
    args = parser.parse_args()
    print(f"{'kind':<8} {'env':<40} {'stored as':<9} {'raw obs bytes':>13} {'bytes/transition':>16} {'ratio':>6}")
    for kind in args.kinds.split(","):
        env_id, raw = KINDS[kind]
        per_transition, dtype = bytes_per_transition(env_id, args.transitions, args.warmup)
        print(f"{kind:<8} {env_id:<40} {dtype:<9} {raw:>13,} {per_transition:>16,.0f} {per_transition / raw:>5.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
