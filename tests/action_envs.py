"""Small envs with masks of valid actions and multi-discrete actions, registered as `tests.action_envs:<id>`.

Every one is the same short task: the observation shows a target action (one-hot per dimension); picking it earns 1
per step (a share per dimension that matches), another valid action earns 0, and an action its mask forbids ends
the episode with -1, as games that forfeit an illegal move do. The target is always valid; of the other actions
about half are valid at each step. 20 steps an episode; a greedy policy that acts only validly scores 20.

- DictMask-v0: 6 actions; the mask is the `action_mask` part of a Dict observation (PettingZoo's convention, int8).
- InfoMask-v0: 6 actions; a Box observation, the mask in `info["action_mask"]` (gymnasium's Taxi convention).
- SmallMultiDiscrete-v0: MultiDiscrete([3, 4]) (12 combinations: the flat layout), a per-dimension mask of 3 + 4
  values in the info.
- TupleActions-v0: Tuple(Discrete(3), Discrete(4, start=1)) without a mask (the flat layout, the env's own tuple).
- LargeMultiDiscrete-v0: MultiDiscrete([8, 8, 8, 8]) (4096 combinations: the branching layout), a per-dimension mask
  as the `action_mask` part of a Dict observation.
- HugeMultiDiscrete-v0: MultiDiscrete([100] * 20): too large for both layouts, refused at start.
- AllFalseMask-v0: DictMask whose mask allows nothing, once in about 2,000 steps, on a step that ends nothing (an env
  fault) and always on the step that ends an episode (a game over leaves no move, which is fine);
  OftenAllFalseMask-v0 once in 5 steps.
- LegalMovesInfo-v0: InfoMask under another key, `info["legal_moves"]` (found with `--action-mask-key legal_moves`).
- MisfitMask-v0: InfoMask whose mask has one value too few (refused at start).
- UnevenMultiDiscrete-v0: MultiDiscrete([9, 9, 9, 4]) without a mask (branching, a narrower last dimension).

Episodes end as a game does (terminated), after 20 steps or at a forbidden action.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

STEPS = 20


class PickTheTarget(gym.Env):
    """The task of the module docstring for `nvec` dimensions; `mask_in` "dict", "info" or None."""

    def __init__(self, nvec=(6,), mask_in: str | None = "dict", kind: str = "discrete", starts=None,
                 all_false_every: int = 0, key: str = "action_mask", misfit: bool = False):
        self.key, self.misfit = key, misfit
        self.nvec = tuple(nvec)
        self.starts = np.asarray(starts or (0,) * len(self.nvec), np.int64)
        self.mask_in, self.kind, self.all_false_every = mask_in, kind, all_false_every
        if kind == "discrete":
            self.action_space = gym.spaces.Discrete(self.nvec[0])
        elif kind == "tuple":
            self.action_space = gym.spaces.Tuple([gym.spaces.Discrete(n, start=int(start))
                                                  for n, start in zip(self.nvec, self.starts, strict=True)])
        else:
            self.action_space = gym.spaces.MultiDiscrete(self.nvec)
        target = gym.spaces.Box(0.0, 1.0, (sum(self.nvec),), np.float32)
        mask = gym.spaces.Box(0, 1, (sum(self.nvec),), np.int8)
        self.observation_space = gym.spaces.Dict({"observation": target, key: mask}) if mask_in == "dict" else target
        self._size, self._offsets, self._nvec = sum(self.nvec), np.cumsum((0,) + self.nvec[:-1]), np.array(self.nvec)
        self._draws = len(self.nvec) + self._size + 1  # targets, the mask's values, the all-false draw
        self._zeros = np.zeros(self._size, np.float32)
        self._target = np.zeros(len(self.nvec), np.int64)
        self._mask = np.ones(self._size, np.int8)
        self._steps = 0

    def _draw(self, ended: bool = False):
        """A new target and mask: the observation and info of a reset or step (few numpy calls: a fast env)."""
        draws = self.np_random.random(self._draws)
        self._target = (draws[:len(self.nvec)] * self._nvec).astype(np.int64)
        chosen = self._offsets + self._target
        valid = draws[len(self.nvec):-1] < 0.5
        valid[chosen] = True
        if self.all_false_every and (ended or draws[-1] < 1 / self.all_false_every):
            valid[:] = False
        self._mask = valid.view(np.int8)
        one_hot = self._zeros.copy()
        one_hot[chosen] = 1.0
        mask = self._mask[:-1].copy() if self.misfit else self._mask.copy()
        if self.mask_in == "dict":
            return {"observation": one_hot, self.key: mask}, {}
        return one_hot, ({self.key: mask} if self.mask_in == "info" else {})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._steps = 0
        return self._draw()

    def step(self, action):
        values = np.asarray(action, np.int64).reshape(-1) - self.starts
        self._steps += 1
        if self.mask_in is not None and not self._mask[self._offsets + values].all():
            observation, info = self._draw(ended=True)
            return observation, -1.0, True, False, info
        reward = float((values == self._target).sum()) / len(self.nvec)
        ended = self._steps >= STEPS  # the game is over: a termination, as a board game's last move
        observation, info = self._draw(ended=ended)
        return observation, reward, ended, False, info


ENVS = {
    "DictMask-v0": {"mask_in": "dict"},
    "InfoMask-v0": {"mask_in": "info"},
    "SmallMultiDiscrete-v0": {"nvec": (3, 4), "mask_in": "info", "kind": "multi-discrete"},
    "TupleActions-v0": {"nvec": (3, 4), "mask_in": None, "kind": "tuple", "starts": (0, 1)},
    "LargeMultiDiscrete-v0": {"nvec": (8, 8, 8, 8), "mask_in": "dict", "kind": "multi-discrete"},
    "HugeMultiDiscrete-v0": {"nvec": (100,) * 20, "mask_in": None, "kind": "multi-discrete"},
    "AllFalseMask-v0": {"mask_in": "dict", "all_false_every": 2000},
    "OftenAllFalseMask-v0": {"mask_in": "dict", "all_false_every": 5},
    "LegalMovesInfo-v0": {"mask_in": "info", "key": "legal_moves"},
    "MisfitMask-v0": {"mask_in": "info", "misfit": True},
    "UnevenMultiDiscrete-v0": {"nvec": (9, 9, 9, 4), "mask_in": None, "kind": "multi-discrete"},
}

for _name, _kwargs in ENVS.items():
    if _name not in gym.registry:
        # 19 of 20: a policy that acts validly and picks the target nearly every step.
        gym.register(_name, entry_point=PickTheTarget, kwargs=_kwargs, reward_threshold=19.0)
