"""Env families from PyPI outside gymnasium, as a user brings them: `--env-id bench.peer_envs:<id>`.

MinAtar 1.0.15 defines gymnasium envs but registers none on import (`minatar.gym.register_envs()` must be called);
importing this module registers `MinAtar/<Game>-v1` (minimal action set, MinAtar's default sticky actions, 10x10xC
bool observation) with a 5,000-step episode cap, so that greedy evaluations end (MinAtar itself has none).
The same module registers `FlappyBird/Features-v0`: flappy-bird-gymnasium's game observed as its 12 features
(positions and speeds of the bird and the next pipes, not the LIDAR scan), with the same episode cap (the game
has none). highway-env and popgym register their ids on import: `highway_env:highway-fast-v0`,
`popgym:popgym-PositionOnlyCartPoleEasy-v0`. Install them with the bench-envs extra.
"""

from __future__ import annotations

import gymnasium as gym

#: MinAtar games (MinAtar's own names) and the cap on an episode, in agent steps.
MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
MAX_EPISODE_STEPS = 5_000

for _game in MINATAR_GAMES:
    _id = f"MinAtar/{_game.title().replace('_', '')}-v1"
    if _id not in gym.registry:
        gym.register(_id, entry_point="minatar.gym:BaseEnv", max_episode_steps=MAX_EPISODE_STEPS,
                     kwargs={"game": _game, "use_minimal_action_set": True})

if "FlappyBird/Features-v0" not in gym.registry:
    gym.register("FlappyBird/Features-v0", entry_point="flappy_bird_gymnasium:FlappyBirdEnv",
                 max_episode_steps=MAX_EPISODE_STEPS, kwargs={"use_lidar": False})
