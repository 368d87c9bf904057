"""Env families from PyPI outside gymnasium, as a user brings them: `--env-id bench.peer_envs:<id>`.

MinAtar 1.0.15 defines gymnasium envs but registers none on import (`minatar.gym.register_envs()` must be called);
importing this module registers `MinAtar/<Game>-v1` (minimal action set, MinAtar's default sticky actions, 10x10xC
bool observation) with a 5,000-step episode cap, so that greedy evaluations end (MinAtar itself has none).
The same module registers `FlappyBird/Features-v0`: flappy-bird-gymnasium's game observed as its 12 features
(positions and speeds of the bird and the next pipes, not the LIDAR scan), with the same episode cap (the game
has none). `MiniGrid/DoorKey-5x5-v0` is MiniGrid's `MiniGrid-DoorKey-5x5-v0` (a 5x5 room: pick up the key, open
the door, reach the goal; 7 actions; reward 1 - 0.9 * steps / 250 at the goal, else 0; `MiniGrid/Empty-Random-6x6-v0`
likewise: an empty room, a random start, reach the goal within 144 steps; `MiniGrid/LavaGapS5-v0`: cross a
column of lava through its one gap to the goal within 100 steps, stepping into lava ends the episode at 0) with
its mission text
filtered out by gymnasium's `FilterObservation`: the text is the same in every episode, and the service refuses
Text parts. What remains is a `Dict` of the agent's 7x7x3 uint8 view (object, colour and state indices) and its
`Discrete(4)` direction. highway-env and popgym register their ids on import: `highway_env:highway-fast-v0`,
`popgym:popgym-PositionOnlyCartPoleEasy-v0`. Install them with the bench-envs extra; MiniGrid declares pygame
>= 2.4, which only its renderer needs, so it is installed beside the extra with `pip install --no-deps
minigrid==3.0.0` (tf-agents pins pygame 2.1.3).
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


def make_minigrid(name: str = "MiniGrid-DoorKey-5x5-v0", **kwargs) -> gym.Env:
    """A MiniGrid env with its constant mission text filtered out: Dict(direction, image)."""
    import minigrid  # noqa: F401  (registers the MiniGrid-* ids)

    return gym.wrappers.FilterObservation(gym.make(name, **kwargs), ["direction", "image"])


#: MiniGrid ids registered here as `MiniGrid/<name>` (mission text filtered out).
MINIGRID_ENVS = ("DoorKey-5x5-v0", "Empty-Random-6x6-v0", "LavaGapS5-v0")

for _name in MINIGRID_ENVS:
    if f"MiniGrid/{_name}" not in gym.registry:
        gym.register(f"MiniGrid/{_name}", entry_point=make_minigrid, kwargs={"name": f"MiniGrid-{_name}"})
