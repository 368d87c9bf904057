"""Masks of valid actions: found without flags, carried in the observation, an empty one an env fault."""

import logging

import numpy as np
import pytest

import tests.action_envs  # noqa: F401 - registers the envs
from dqn.envs.action_masks import MaskInObservation, NoValidAction
from dqn.envs.making import EnvOptions, make_gym_env
from dqn.envs.spaces import EnvError
from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.resolve import resolve_settings, resolved_builder
from dqn.settings.config import LearnerConfig

# Every auto setting but the mask decided: the resolve step then only resets the env once.
DECIDED = {"observation_history": 1, "image_encoding": "scaled", "samples_per_insert": 4.0}


def config(env: str, **settings) -> LearnerConfig:
    return LearnerConfig(env_id=f"tests.action_envs:{env}", fc_layer_params=(16,), **{**DECIDED, **settings})


@pytest.mark.parametrize(("env", "source"), [("DictMask-v0", "observation"), ("InfoMask-v0", "info"),
                                             ("LargeMultiDiscrete-v0", "observation"),
                                             ("SmallMultiDiscrete-v0", "info"), ("TupleActions-v0", "none")])
def test_masks_are_found_without_flags(env, source, caplog):
    with caplog.at_level(logging.INFO):
        assert resolve_settings(config(env)).action_mask == source
    assert f"action_mask auto: {source} (" in caplog.text


def test_a_setting_names_another_key_and_an_explicit_source_is_kept():
    assert resolve_settings(config("LegalMovesInfo-v0")).action_mask == "none"
    found = resolve_settings(config("LegalMovesInfo-v0", action_mask_key="legal_moves"))
    assert found.action_mask == "info"
    builder = resolved_builder(found)
    assert set(builder.observation_spec) == {"observation", "legal_moves"}
    assert builder.agent.valid_actions.mask_key == "legal_moves"
    assert resolve_settings(config("DictMask-v0", action_mask="none")).action_mask == "none"


def test_the_mask_never_enters_the_network_unless_asked():
    masked = resolved_builder(config("InfoMask-v0"))
    assert set(masked.observation_spec) == {"observation", "action_mask"}  # it rides in replay with the observation
    assert masked.agent.q_network.input_tensor_spec.shape == (6,)  # the network reads the observation part alone
    assert masked.numpy_q_network() is not None  # so the actors' numpy mirror still runs it
    asked = resolved_builder(config("InfoMask-v0", action_mask_input=True))
    assert set(asked.agent.q_network.input_tensor_spec) == {"observation", "action_mask"}
    unmasked = resolved_builder(config("DictMask-v0", action_mask="none"))
    assert not unmasked.agent.valid_actions.masked  # none: the Dict's part is one more input, as before


def test_a_mask_that_does_not_fit_the_actions_stops_the_run_at_start():
    with pytest.raises(EnvError, match="'tests.action_envs:MisfitMask-v0'.*has 5 values, but the 6 actions take 6"):
        resolve_settings(config("MisfitMask-v0"))


def test_an_info_mask_becomes_a_part_of_the_observation():
    env = make_gym_env("tests.action_envs:InfoMask-v0", EnvOptions(action_mask="info"))
    assert set(env.observation_space.spaces) == {"observation", "action_mask"}
    observation, info = env.reset(seed=3)
    np.testing.assert_array_equal(observation["action_mask"], env.unwrapped._mask)
    assert "action_mask" not in info  # the observation holds it now
    assert observation["action_mask"].dtype == np.uint8 and env.observation_space.contains(
        {**observation, "action_mask": observation["action_mask"].astype(np.int8)})
    target = int(np.argmax(observation["observation"]))
    observation, reward, terminated, _, info = env.step(target)
    assert reward == 1.0 and not terminated and "action_mask" not in info
    np.testing.assert_array_equal(observation["action_mask"], env.unwrapped._mask)


class FixedMaskEnv(tests.action_envs.PickTheTarget):
    """InfoMask with a mask of its own choosing (set `next_mask`; None leaves the key out of the info)."""

    next_mask: np.ndarray | None = np.ones(6, np.int8)

    def _draw(self, ended: bool = False):
        observation, _ = super()._draw(ended)
        return observation, ({} if self.next_mask is None else {"action_mask": self.next_mask.copy()})


def test_an_empty_mask_is_a_fault_unless_its_step_ends_the_episode(caplog):
    inner = FixedMaskEnv(mask_in="info")
    env = MaskInObservation(inner, source="info", key="action_mask")
    env.reset(seed=0)
    inner.next_mask = np.zeros(6, np.int8)
    with pytest.raises(NoValidAction, match="allows no action on a step that does not end the episode"):
        env.step(0)  # action 0 is valid: the step goes on, and its next mask allows nothing
    inner.next_mask = np.ones(6, np.int8)
    env.reset(seed=1)
    inner._steps, inner.next_mask = tests.action_envs.STEPS - 1, np.zeros(6, np.int8)  # the next step ends the game
    observation, _, terminated, _, _ = env.step(0)
    assert terminated and observation["action_mask"].all()  # no action follows: opened, never a fault
    with pytest.raises(NoValidAction):
        env.reset(seed=2)
    inner.next_mask = None
    with caplog.at_level(logging.WARNING, logger="envs"):
        observation, _ = env.reset(seed=3)
        env.reset(seed=4)
    assert observation["action_mask"].all() and caplog.text.count("every action counts as valid") == 1


def test_the_vector_env_recreates_a_sub_env_whose_mask_allows_nothing(caplog):
    env = GymnasiumVectorEnvironment("tests.action_envs:OftenAllFalseMask-v0", 4, seed=0,
                                     options=EnvOptions(action_mask="observation"))
    rng = np.random.default_rng(0)
    time_step = env.reset()
    faulted = 0
    with caplog.at_level(logging.WARNING, logger="envs"):
        for _ in range(60):
            mask = time_step.observation["action_mask"].astype(bool)
            assert mask.any(axis=1).all()  # no observation the service sees leaves nothing to do
            time_step = env.step(np.array([rng.choice(np.flatnonzero(row)) for row in mask]))
            faulted += int(env.faulted.sum())
            assert (time_step.step_type[env.faulted] == 2).all()  # the faulted step ends its episode (LAST)
    assert faulted > 5 and env.restarts >= faulted
    line = next(line for line in caplog.text.splitlines() if "NoValidAction" in line)
    assert "recreating and resetting it" in line and "Traceback" not in caplog.text
    env.close()
