"""dqn/envs/action_spaces.py: multi-discrete actions laid out flat or branched, their masks, and the size rule."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import tests.action_envs  # noqa: F401 - registers the envs
from dqn.envs.action_spaces import ActionForm
from dqn.envs.making import EnvOptions, env_specs, make_gym_env
from dqn.envs.spaces import EnvError
from dqn.model.policy_export import env_action_spec
from dqn.settings.common import MAX_BRANCH_OUTPUTS, MAX_FLAT_ACTIONS


def test_a_discrete_space_is_used_as_it_is():
    form = ActionForm.of(gym.spaces.Discrete(5, start=2))
    assert (form.layout, form.q_shape, form.mask_length) == ("single", (5,), 5)
    assert form.service_space(gym.spaces.Discrete(5, start=2)) == gym.spaces.Discrete(5, start=2)


def test_a_small_product_is_flat_and_numbered_row_major_with_the_envs_starts():
    space = gym.spaces.MultiDiscrete([3, 4], start=[1, -2])
    form = ActionForm.of(space)
    assert (form.layout, form.q_shape, form.size) == ("flat", (12,), 12)
    for index in range(12):
        values = np.array(np.unravel_index(index, (3, 4))) + [1, -2]
        np.testing.assert_array_equal(form.env_action(index), values)
        assert space.contains(form.env_action(index))
    env_actions = np.stack([form.env_action(index) for index in range(12)])
    np.testing.assert_array_equal(form.service_actions(env_actions), np.arange(12))
    np.testing.assert_array_equal(form.env_actions_tf(tf.range(12, dtype=tf.int64)).numpy(), env_actions)


def test_a_tuple_of_discrete_gets_tuples_back():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(4, start=1)))
    form = ActionForm.of(space)
    assert (form.kind, form.layout, form.size) == ("tuple", "flat", 12)
    assert form.env_action(7) == (1, 4) and space.contains(form.env_action(7))
    first, second = form.env_actions_tf(tf.constant([7, 0], tf.int64))
    assert first.numpy().tolist() == [1, 0] and second.numpy().tolist() == [4, 1]
    np.testing.assert_array_equal(form.service_actions((np.array([1, 0]), np.array([4, 1]))), [7, 0])
    spec = env_action_spec(form)
    assert [(s.minimum, s.maximum) for s in spec] == [(0, 2), (1, 4)]


def test_above_the_flat_limit_a_branching_layout_and_beyond_both_a_refusal_with_the_size_and_the_fix():
    flat_max = gym.spaces.MultiDiscrete([16, 16])  # 256 combinations: flat
    assert ActionForm.of(flat_max).layout == "flat" and MAX_FLAT_ACTIONS == 256
    branching = ActionForm.of(gym.spaces.MultiDiscrete([8, 8, 5]), max_flat=256)  # 320 combinations
    assert (branching.layout, branching.q_shape) == ("branching", (3, 8))
    np.testing.assert_array_equal(branching.padding()[2], [True] * 5 + [False] * 3)
    np.testing.assert_array_equal(branching.env_action(np.array([7, 0, 4])), [7, 0, 4])
    assert ActionForm.of(gym.spaces.MultiDiscrete([32] * 32)).layout == "branching"  # 1024 outputs
    with pytest.raises(EnvError) as refused:
        ActionForm.of(gym.spaces.MultiDiscrete([100] * 20))
    message = str(refused.value)
    assert "\n" not in message and "2000 outputs" in message and f"--max-branch-outputs {MAX_BRANCH_OUTPUTS}" in message
    assert "1e+40 combinations" in message and "discretize coarser" in message
    with pytest.raises(EnvError, match="DQN needs Discrete, MultiDiscrete or a Tuple of Discrete"):
        ActionForm.of(gym.spaces.Box(-1, 1, (2,)))


def test_the_limits_are_settings():
    assert ActionForm.of(gym.spaces.MultiDiscrete([3, 4]), max_flat=8).layout == "branching"
    with pytest.raises(EnvError, match="--max-branch-outputs 4"):
        ActionForm.of(gym.spaces.MultiDiscrete([3, 4]), max_flat=8, max_branch=4)


def test_masks_per_dimension_or_per_combination_in_the_services_layout():
    form = ActionForm.of(gym.spaces.MultiDiscrete([3, 4]))
    per_dim = np.array([1, 0, 1, 0, 1, 1, 0], np.int8)
    expected = np.outer([1, 0, 1], [0, 1, 1, 0]).ravel()
    for given in (per_dim, (per_dim[:3], per_dim[3:]), per_dim.astype(bool)):
        mask = form.service_mask(given)
        assert mask.dtype == np.uint8
        np.testing.assert_array_equal(mask, expected)
    combinations = np.zeros(12, np.int8)
    combinations[[0, 11]] = 1
    np.testing.assert_array_equal(form.service_mask(combinations), combinations)
    with pytest.raises(EnvError, match="has 9 values, but action dimensions \\[3, 4\\] take 7"):
        form.service_mask(np.ones(9))
    branching = ActionForm.of(gym.spaces.MultiDiscrete([3, 4]), max_flat=8)
    np.testing.assert_array_equal(branching.service_mask(per_dim).reshape(2, 4), [[1, 0, 1, 0], [0, 1, 1, 0]])
    with pytest.raises(EnvError, match="take 7 \\(per dimension\\)"):
        branching.service_mask(np.ones(12))  # a product mask cannot be laid out per head
    assert not branching.allows_some(branching.service_mask(np.array([1, 1, 1, 0, 0, 0, 0])))


def test_the_service_acts_on_the_envs_own_space_through_the_adapter():
    specs = env_specs("tests.action_envs:SmallMultiDiscrete-v0", EnvOptions(action_mask="info"))
    assert specs.action.shape == () and (specs.action.minimum, specs.action.maximum) == (0, 11)
    assert specs.observation["action_mask"].shape == (12,) and specs.actions.layout == "flat"
    large = env_specs("tests.action_envs:LargeMultiDiscrete-v0", EnvOptions(action_mask="observation"))
    assert large.action.shape == (4,) and large.actions.layout == "branching"
    assert large.observation["action_mask"].shape == (32,)
    env = make_gym_env("tests.action_envs:TupleActions-v0")
    env.reset(seed=0)
    seen = []
    for index in range(12):
        env.unwrapped.step = lambda action, seen=seen: (seen.append(action), env.unwrapped.reset()[0], 0.0, False,
                                                        False, {})[1:]
        env.step(index)
    assert seen == [(a, b) for a in range(3) for b in range(1, 5)]  # the env's own tuples, its start of 1 kept
