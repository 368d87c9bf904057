"""The held-out families of bench/held_out.md as gymnasium ids: `bench.held_out_envs:<id>`.

Importing this module registers the ids below (gymnasium and numpy only; each family's package is imported when
its env is made, so the peer's virtualenv can import this module too):

- `bsuite-<experiment>-v0` for `<experiment>/0` of bsuite 0.3.6 (`catch`, `deep_sea`, `cartpole_swingup`,
  `umbrella_length`, `discounting_chain`, `memory_len`): bsuite's `dm_env` played through `DmEnvAsGymnasium`. A
  `reset(seed=s)` rebuilds the env with `seed=s` where its loader takes one; settings that define the experiment
  itself (deep_sea's and discounting_chain's `mapping_seed`) stay those of `<experiment>/0`.
- `bsuite-<experiment>-10-v0` for `<experiment>/10`, the middle rung of the four experiments whose settings form a
  difficulty ladder (`deep_sea` size 30, `cartpole_swingup` height 0.5, `umbrella_length` chain 12, `memory_len`
  length 12): the harder held-out envs of bench/held_out.md, named before any run on them.
- `mo-<id>` for MO-Gymnasium 1.3.2's `deep-sea-treasure-v0`, `four-room-v0`, `resource-gathering-v0` and
  `fruit-tree-v0`: the vector reward summed with equal weights (`SummedReward`), the env's own episode limit kept.
- gym-anytrading 2.0.0 needs no adapter: its ids are `gym_anytrading:stocks-v0` and `gym_anytrading:forex-v0`.

None has a `reward_threshold`, so a run of the service goes to its budget.
"""

from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np

BSUITE_EXPERIMENTS = ("catch", "deep_sea", "cartpole_swingup", "umbrella_length", "discounting_chain", "memory_len")
MO_ENVS = ("deep-sea-treasure-v0", "four-room-v0", "resource-gathering-v0", "fruit-tree-v0")
ANYTRADING_IDS = ("gym_anytrading:stocks-v0", "gym_anytrading:forex-v0")
# bsuite's difficulty ladders (deep_sea/0-20, cartpole_swingup/0-19, umbrella_length/0-22, memory_len/0-22): rung 10,
# about the middle of each, is fixed by that rule alone so that no score can have chosen it.
BSUITE_LADDERS = ("deep_sea", "cartpole_swingup", "umbrella_length", "memory_len")
HARDER_RUNG = 10


def held_out_ids() -> dict[str, list[str]]:
    """Family -> the ids a sitting passes to `--envs`."""
    here = "bench.held_out_envs"
    return {"bsuite": [f"{here}:bsuite-{name}-v0" for name in BSUITE_EXPERIMENTS],
            "mo-gymnasium": [f"{here}:mo-{name}" for name in MO_ENVS],
            "gym-anytrading": list(ANYTRADING_IDS),
            "bsuite, harder rungs": [f"{here}:bsuite-{name}-{HARDER_RUNG}-v0" for name in BSUITE_LADDERS]}


def _box(spec) -> gym.spaces.Box:
    """A dm_env array spec as a Box: a bounded one keeps its bounds, a plain one is unbounded."""
    low = np.broadcast_to(getattr(spec, "minimum", -np.inf), spec.shape).astype(spec.dtype)
    high = np.broadcast_to(getattr(spec, "maximum", np.inf), spec.shape).astype(spec.dtype)
    return gym.spaces.Box(low, high, spec.shape, spec.dtype)


class DmEnvAsGymnasium(gym.Env):
    """A bsuite experiment's `dm_env` with gymnasium's API.

    A last step with discount 0 terminates; one with a non-zero discount (a time limit of the env's own) truncates.
    """

    metadata = {"render_modes": []}

    def __init__(self, experiment: str, rung: int = 0):
        from bsuite import sweep

        self._experiment = experiment
        self._settings = dict(sweep.SETTINGS[f"{experiment}/{rung}"])
        self._env = self._load(None)
        self.observation_space = _box(self._env.observation_spec())
        self.action_space = gym.spaces.Discrete(int(self._env.action_spec().num_values))

    def _load(self, seed: int | None):
        import bsuite

        loader = bsuite.bsuite.EXPERIMENT_NAME_TO_ENVIRONMENT[self._experiment]
        settings = dict(self._settings)
        if seed is not None and "seed" in inspect.signature(loader).parameters:
            settings["seed"] = seed
        return bsuite.load(self._experiment, settings)

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._env = self._load(seed)
        step = self._env.reset()
        return np.asarray(step.observation, self.observation_space.dtype), {}

    def step(self, action):
        step = self._env.step(int(action))
        last = step.last()
        terminated = bool(last and step.discount == 0)
        return (np.asarray(step.observation, self.observation_space.dtype), float(step.reward or 0.0), terminated,
                bool(last and not terminated), {})


class SummedReward(gym.Wrapper):
    """An MO-Gymnasium env whose vector reward is summed with equal weights into one number."""

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, float(np.sum(reward)), terminated, truncated, info


def _make_mo(env_id: str, **kwargs) -> gym.Env:
    import mo_gymnasium

    return SummedReward(mo_gymnasium.make(env_id, **kwargs))


for _experiment in BSUITE_EXPERIMENTS:
    if f"bsuite-{_experiment}-v0" not in gym.registry:
        gym.register(f"bsuite-{_experiment}-v0", entry_point=DmEnvAsGymnasium, kwargs={"experiment": _experiment})
for _experiment in BSUITE_LADDERS:
    if f"bsuite-{_experiment}-{HARDER_RUNG}-v0" not in gym.registry:
        gym.register(f"bsuite-{_experiment}-{HARDER_RUNG}-v0", entry_point=DmEnvAsGymnasium,
                     kwargs={"experiment": _experiment, "rung": HARDER_RUNG})
for _mo_id in MO_ENVS:
    if f"mo-{_mo_id}" not in gym.registry:
        # mo_gymnasium.make applies the env's own TimeLimit; registering it again here would wrap it twice.
        gym.register(f"mo-{_mo_id}", entry_point=_make_mo, kwargs={"env_id": _mo_id})
