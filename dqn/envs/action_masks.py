"""Masks of valid actions: where an env gives one, and how it becomes part of the observation the service sees.

Two conventions are found without a flag (`action_mask` auto, decided once per run in dqn/resolve.py from the env's
spaces and its first seeded reset):
- observation: a `Dict` observation with an `action_mask_key` part (PettingZoo's classic games);
- info: `info[action_mask_key]` at every reset and step (gymnasium's Taxi).

Either way `MaskInObservation` gives the service a `Dict` observation whose `action_mask_key` part is the mask in
the service's action layout (dqn/envs/action_spaces.py: uint8, one value per Q-value) and whose other parts are the
env's observation (an info mask joins a Dict's parts, or sits beside a part named "observation"). So the mask is
stored in replay with its observation, and the learner's target takes its max over the next step's valid actions.
The Q-network reads the other parts only, unless `action_mask_input` asks for the mask too (dqn/model/actions.py).

A mask that allows no action (for a branching layout: no value of some dimension) ends nothing well. After a step
that terminates its episode it is fine (no action is taken from that observation, and a terminal step's value is
never bootstrapped): it is opened to every action there. Anywhere else it is an env fault: `NoValidAction` is raised
inside the sub-env, which the vector env's fault handling turns into a truncated episode and a recreated sub-env
(dqn/envs/faults.py), never an action 0 picked in silence. An info without the mask counts as every action valid,
logged once per sub-env. The info the service keeps (`GymnasiumVectorEnvironment.infos`) leaves an info mask out.
"""

from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np

from dqn.envs.action_spaces import ActionForm, ServiceActions
from dqn.envs.faults import BrokenEnvPromise
from dqn.envs.spaces import EnvError

log = logging.getLogger("envs")

#: `action_mask` values: where the mask is read (after the resolve step; "auto" before it).
MASK_SOURCES = ("observation", "info", "none")
#: The observation's own part when an info mask joins an observation that is not a Dict.
OBSERVATION_PART = "observation"


class NoValidAction(BrokenEnvPromise):
    """An env's mask allows no action after a step that does not end the episode (or at a reset)."""


def action_form_of(env: gym.Env) -> ActionForm:
    """The action form of a made env (`ServiceActions` keeps it; else the env acts on its own Discrete)."""
    layer = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, ServiceActions):
            return layer.form
        layer = layer.env
    return ActionForm.of(env.action_space)


def mask_in_observation(space: gym.Space, key: str) -> bool:
    """True for a Dict observation with a `key` part (the observation convention)."""
    return isinstance(space, gym.spaces.Dict) and key in space.spaces


def raw_mask(observation, info: dict, key: str):
    """The env's own mask at a reset or step (observation part first, then info), or None."""
    if isinstance(observation, dict) and key in observation:
        return observation[key]
    return info.get(key) if isinstance(info, dict) else None


class MaskInObservation(gym.Wrapper):
    """The env's mask (from `source`, "observation" or "info") as the `key` part of a Dict observation."""

    def __init__(self, env: gym.Env, source: str, key: str):
        super().__init__(env)
        self._source, self._key = source, key
        self._form = action_form_of(env)
        inner = env.observation_space
        mask_space = gym.spaces.MultiBinary(self._form.mask_length)
        nested = isinstance(inner, gym.spaces.Dict)
        if source == "observation" and not mask_in_observation(inner, key):
            raise EnvError(f"--action-mask observation: the observation {inner} has no {key!r} part; set "
                           "--action-mask-key to its mask's key, or --action-mask info / none")
        if source == "info" and nested and key in inner.spaces:
            raise EnvError(f"--action-mask info: the observation already has a {key!r} part; set --action-mask "
                           "observation, or --action-mask-key to the info's key")
        parts = dict(inner.spaces) if nested else {OBSERVATION_PART: inner}
        self._nested = nested
        self.observation_space = gym.spaces.Dict({**parts, key: mask_space})
        self._all_valid = np.ones(self._form.mask_length, np.uint8)
        self._warned = False

    def _observe(self, observation, info, terminated: bool):
        mask = raw_mask(observation, info, self._key)
        parts = dict(observation) if self._nested else {OBSERVATION_PART: observation}
        if mask is None:
            if not self._warned:
                self._warned = True
                log.warning("env %s gives no %r in its info at this step: every action counts as valid where it "
                            "gives none", self.spec.id if self.spec else self.env, self._key)
            parts[self._key] = self._all_valid
            return parts
        service = self._form.service_mask(mask)
        if not self._form.allows_some(service):
            if not terminated:
                raise NoValidAction("the mask of valid actions allows no action on a step that does not end the "
                                    "episode (or at a reset); the env must leave at least one action valid")
            service = self._all_valid  # a terminal step: no action follows it (see the module docstring)
        parts[self._key] = service
        return parts

    def _without_mask(self, info: dict) -> dict:
        """The info without an info mask: the observation holds it now (gymnasium's vector env would batch it too)."""
        if self._source != "info" or self._key not in info:
            return info
        return {key: value for key, value in info.items() if key != self._key}

    def reset(self, **kwargs):
        """The reset's observation with its mask."""
        observation, info = self.env.reset(**kwargs)
        return self._observe(observation, info, terminated=False), self._without_mask(info)

    def step(self, action):
        """The step's observation with its mask (NoValidAction for an empty one that ends nothing)."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation = self._observe(observation, info, bool(terminated))
        return observation, reward, terminated, truncated, self._without_mask(info)


class MaskSeen:
    """What random play shows of a mask: whether the Dict observation or the reset's info holds `key`.

    Each mask it sees is put in the service's layout once, so a mask of the wrong size stops the run at start
    (EnvError) instead of in every actor.
    """

    def __init__(self, key: str, form: ActionForm):
        self.key, self.form = key, form
        self.in_info: bool | None = None  # None until the first reset was seen

    def see(self, step) -> None:
        """Notes, at the first reset, whether its info holds the mask; checks every mask's size."""
        mask = raw_mask(step.observation, step.info, self.key)
        if self.in_info is None and step.action is None:
            self.in_info = isinstance(step.info, dict) and self.key in step.info
        if mask is not None:
            self.form.service_mask(mask)


def action_mask_for(observation_spec, key: str, seen: MaskSeen | None) -> tuple[str, str]:
    """(source, why) of `action_mask` auto, from the env's own observation spec and random play."""
    if isinstance(observation_spec, dict) and key in observation_spec:
        return "observation", f"the Dict observation has a {key!r} part"
    if seen is None or seen.in_info is None:
        return "none", f"no {key!r} part in the observation, and random play failed before its first reset"
    if seen.in_info:
        return "info", f"the first reset's info has {key!r}"
    return "none", f"neither the observation nor the first reset's info has {key!r}"
