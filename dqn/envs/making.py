"""Making one env of an id: `gym.make` plus the wrappers every role applies, with clear errors for bad ids.

`EnvOptions` is how every role makes an env beyond its id (Atari preprocessing, an episode cap); the defaults
change nothing for non-Atari ids, so CartPole is made exactly as `gym.make(env_id)`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
from tf_agents.specs import array_spec

from dqn.envs.action_masks import MaskInObservation, action_form_of
from dqn.envs.action_spaces import ActionForm, service_actions
from dqn.envs.atari import atari_make_kwargs, atari_wrappers, is_atari
from dqn.envs.spaces import EnvError, action_spec, check_spaces, observation_spec
from dqn.settings.common import MAX_BRANCH_OUTPUTS, MAX_FLAT_ACTIONS


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """How every role makes an env beyond its id; hashable, because `env_specs` is cached on it.

    The defaults change nothing for non-Atari ids: CartPole is made exactly as `gym.make(env_id)`.
    Field meanings and sources: the fields of the same names in `dqn.config.CommonConfig`.
    """

    max_episode_steps: int = 0
    atari_noop_max: int = 30
    atari_frame_skip: int = 4
    atari_screen_size: int = 84
    atari_grayscale: bool = True
    atari_terminal_on_life_loss: bool = False
    atari_fire_on_reset: bool = False
    atari_clip_rewards: bool = False
    atari_frame_stack: int = 4
    atari_repeat_action_probability: float = 0.25
    observation_history: int = 1
    action_mask: str = "none"
    action_mask_key: str = "action_mask"
    max_flat_actions: int = MAX_FLAT_ACTIONS
    max_branch_outputs: int = MAX_BRANCH_OUTPUTS

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> EnvOptions:
        """The options held by a config (its fields of the same names), with `overrides` in their place.

        Settings the env decides at auto must be decided first (`dqn.resolve.resolve_settings`).
        """
        options = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)} | overrides
        if options["observation_history"] is None:
            raise ValueError("observation_history auto must be resolved before the env is made "
                             "(dqn.resolve.resolve_settings)")
        if options["action_mask"] == "auto":
            raise ValueError("action_mask auto must be resolved before the env is made (dqn.resolve.resolve_settings)")
        return cls(**options)

    def for_evaluation(self) -> EnvOptions:
        """These options without the training-only ones: evaluations play whole games and score unclipped."""
        return dataclasses.replace(self, atari_terminal_on_life_loss=False, atari_clip_rewards=False)


DEFAULT_OPTIONS = EnvOptions()


def gym_make_kwargs(env_id: str, options: EnvOptions, kwargs: dict[str, Any]) -> dict[str, Any]:
    """gym.make keyword arguments for `env_id` under `options` (explicit kwargs win)."""
    if is_atari(env_id):
        return {**atari_make_kwargs(options), **kwargs}
    return dict(kwargs)


def env_wrappers(env_id: str, options: EnvOptions) -> list[Callable[[gym.Env], gym.Env]]:
    """Wrappers applied to each made env, innermost first; for a Discrete env without a mask none but Atari's.

    The service's action layout first (dqn/envs/action_spaces.py), the mask of valid actions after the
    observation history (which stacks the env's own vector observation) and inside the episode cap.
    """
    wrappers: list[Callable[[gym.Env], gym.Env]] = [functools.partial(
        service_actions, max_flat=options.max_flat_actions, max_branch=options.max_branch_outputs)]
    if is_atari(env_id):
        wrappers += atari_wrappers(options)
    if options.observation_history > 1:
        wrappers.append(functools.partial(stack_vector_observations, steps=options.observation_history))
    if options.action_mask != "none":
        wrappers.append(functools.partial(MaskInObservation, source=options.action_mask, key=options.action_mask_key))
    if options.max_episode_steps:
        # Outermost, so the limit counts agent steps (an inner TimeLimit on Atari would count raw frames).
        wrappers.append(lambda env: gym.wrappers.TimeLimit(env, options.max_episode_steps))
    return wrappers


def stack_vector_observations(env: gym.Env, steps: int) -> gym.Env:
    """`env` observing its last `steps` vector observations as one vector, oldest first (the first repeated at reset).

    A short memory without a recurrent network: differences of positions give velocities in a partially observed
    env. Only rank-1 `Box` observations: stacking images or nests is the Atari frame stack's or an LSTM's job.
    """
    space = env.observation_space
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
        env.close()
        raise EnvError(f"--observation-history {steps} stacks vector observations, but this env observes {space}: "
                       "set --observation-history 1 (use --lstm-size for a memory of other observations)")
    return gym.wrappers.FlattenObservation(gym.wrappers.FrameStackObservation(env, steps))


def make_gym_env(env_id: str, options: EnvOptions | None = None, **kwargs: Any) -> gym.Env:
    """`gym.make` plus the wrappers of `options`, with a clear error for unknown ids and unsupported spaces."""
    options = options or DEFAULT_OPTIONS
    try:
        env = gym.make(env_id, **gym_make_kwargs(env_id, options, kwargs))
    except gym.error.Error as error:
        raise EnvError(f"unknown gymnasium env id {env_id!r}: {error}") from None
    except ImportError as error:  # the `module:` of a user's id, or something it imports, is not installed
        raise EnvError(f"env id {env_id!r}: importing its module failed ({error}); install the package that "
                       "registers it, or run from the directory that holds the module (or add it to PYTHONPATH)"
                       ) from None
    try:
        for wrapper in env_wrappers(env_id, options):
            env = wrapper(env)
    except EnvError as error:
        raise EnvError(f"env {env_id!r}: {error}") from None
    try:
        check_spaces(env_id, env.observation_space, env.action_space)
    except EnvError:
        env.close()
        raise
    return env


def registered_episode_limit(env_id: str) -> int | None:
    """The `max_episode_steps` an id is registered with (its TimeLimit), None if it has none."""
    module, _, name = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)  # registers the id (already imported once the env was made)
        return gym.spec(name).max_episode_steps
    except (gym.error.Error, ImportError):
        return None


class EnvSpecs(NamedTuple):
    """What the roles need of an env before they build anything: its preprocessed spaces as specs, its threshold."""

    observation: object  # an array spec, or a nest of them
    action: array_spec.BoundedArraySpec
    reward_threshold: float | None
    actions: ActionForm  # the env's action space and the service's layout of it


@functools.lru_cache(maxsize=32)
def env_specs(env_id: str, options: EnvOptions = DEFAULT_OPTIONS) -> EnvSpecs:
    """(observation spec, action spec, reward threshold, action form) of an env id as wrapped by `options`, validated.

    Built once per process and (id, options) pair; pass `EnvOptions.from_config(config)` so every role
    derives the same preprocessed spaces.
    """
    env = make_gym_env(env_id, options)
    try:
        return EnvSpecs(observation_spec(env.observation_space), action_spec(env.action_space),
                        env.spec.reward_threshold, action_form_of(env))
    finally:
        env.close()
