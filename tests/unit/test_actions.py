"""dqn/model/actions.py: numpy and TF agree, masked actions are never chosen, its callers act as before."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.utils import common

from actor.initial_priorities import InitialPriorities
from dqn.model import actions
from dqn.model.collect_policy import RandomCollectPolicy
from dqn.model.exploration import HeldRandomActions
from dqn.model.numpy_policy import HostEpsilonGreedy
from dqn.replay_layout.priority_scale import PriorityScale
from dqn.resolve import resolved_builder
from dqn.settings.config import LearnerConfig

NUM_ACTIONS = 6


def random_q_and_mask(shape, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Q-values of `shape` [..., A] and a mask with at least one valid action per row (most rows partly masked)."""
    rng = np.random.default_rng(seed)
    q_values = rng.normal(size=shape).astype(np.float32)
    mask = rng.random(shape) < 0.5
    keep = rng.integers(0, shape[-1], size=shape[:-1])
    np.put_along_axis(mask, keep[..., None], True, axis=-1)
    return q_values, mask


class FixedQ:
    """A network whose Q-values are given (the policies under test read only `q_values`)."""

    def __init__(self, q_values: np.ndarray):
        self.values = q_values

    def q_values(self, observation) -> np.ndarray:
        return self.values.copy()


@pytest.mark.parametrize("shape", [(64, NUM_ACTIONS), (5, 7, 3)])
@pytest.mark.parametrize("masked", [False, True])
def test_numpy_and_tf_give_the_same_greedy_action_max_and_taken_q(shape, masked):
    q_values, mask = random_q_and_mask(shape, seed=1)
    mask = mask if masked else None
    tf_mask = None if mask is None else tf.constant(mask)
    greedy = actions.greedy_actions(q_values, mask)
    np.testing.assert_array_equal(greedy, actions.greedy_actions_tf(tf.constant(q_values), tf_mask).numpy())
    np.testing.assert_array_equal(actions.max_q_values(q_values, mask),
                                  actions.max_q_values_tf(tf.constant(q_values), tf_mask).numpy())
    np.testing.assert_array_equal(np.take_along_axis(q_values, greedy[..., None], -1)[..., 0],
                                  actions.taken_q_values_tf(tf.constant(q_values), tf.constant(greedy)).numpy())
    if masked:
        assert (greedy != q_values.argmax(-1)).any()  # the mask changed some choices: the test is not trivial


def test_without_a_mask_each_function_is_the_plain_call():
    q_values, _ = random_q_and_mask((32, NUM_ACTIONS), seed=2)
    np.testing.assert_array_equal(actions.greedy_actions(q_values), q_values.argmax(axis=1))
    np.testing.assert_array_equal(actions.max_q_values(q_values), q_values.max(axis=1))
    chosen = q_values.argmax(axis=1)
    np.testing.assert_array_equal(actions.taken_q_values(q_values, chosen), q_values[np.arange(32), chosen])
    # Same draws from the generator as the one `integers` call the callers made, and the generator left in step.
    ours, plain = np.random.default_rng(9), np.random.default_rng(9)
    np.testing.assert_array_equal(actions.random_actions(ours, 50, NUM_ACTIONS, minimum=2),
                                  plain.integers(2, 2 + NUM_ACTIONS, 50))
    assert ours.random() == plain.random()


def test_masked_actions_are_never_the_greedy_action_or_the_max():
    q_values, mask = random_q_and_mask((500, NUM_ACTIONS), seed=3)
    q_values[~mask] += 100.0  # every masked action would win without the mask
    for greedy in (actions.greedy_actions(q_values, mask),
                   actions.greedy_actions_tf(tf.constant(q_values), tf.constant(mask)).numpy()):
        assert np.take_along_axis(mask, greedy[:, None], 1).all()
    for best in (actions.max_q_values(q_values, mask),
                 actions.max_q_values_tf(tf.constant(q_values), tf.constant(mask)).numpy()):
        assert (best < 50).all()


def test_a_valid_action_is_chosen_even_when_every_valid_q_value_is_minus_infinity():
    q_values = np.array([[-np.inf, -np.inf, -np.inf]], np.float32)
    mask = np.array([[False, False, True]])
    assert actions.greedy_actions(q_values, mask).tolist() == [2]
    assert actions.greedy_actions_tf(tf.constant(q_values), tf.constant(mask)).numpy().tolist() == [2]


def test_random_actions_are_uniform_over_the_valid_actions():
    draws = 60_000
    mask = np.zeros((draws, NUM_ACTIONS), bool)
    mask[:, [0, 2, 5]] = True
    mask[::2, 3] = True  # half the rows also allow action 3
    numpy_actions = actions.random_actions(np.random.default_rng(4), draws, NUM_ACTIONS, mask, minimum=1) - 1
    tf_actions = actions.random_actions_tf(tf.random.Generator.from_seed(4), [draws], NUM_ACTIONS,
                                           tf.constant(mask)).numpy()
    for drawn in (numpy_actions, tf_actions):
        assert np.take_along_axis(mask, drawn[:, None], 1).all()
        for rows, valid in ((slice(0, None, 2), [0, 2, 3, 5]), (slice(1, None, 2), [0, 2, 5])):
            shares = np.bincount(drawn[rows], minlength=NUM_ACTIONS)[valid] / (draws / 2)
            np.testing.assert_allclose(shares, 1 / len(valid), atol=0.012)


def test_tf_random_actions_without_a_mask_cover_the_range():
    drawn = actions.random_actions_tf(tf.random.Generator.from_seed(5), [6000], NUM_ACTIONS, minimum=3).numpy()
    assert drawn.dtype == np.int64
    np.testing.assert_allclose(np.bincount(drawn - 3, minlength=NUM_ACTIONS) / 6000, 1 / NUM_ACTIONS, atol=0.025)


def test_a_row_without_valid_actions_raises_in_numpy():
    q_values = np.zeros((3, NUM_ACTIONS), np.float32)
    mask = np.ones((3, NUM_ACTIONS), bool)
    mask[1] = False
    with pytest.raises(ValueError, match="allows no action in 1 row"):
        actions.greedy_actions(q_values, mask)
    with pytest.raises(ValueError, match="allows no action"):
        actions.max_q_values(q_values, mask)
    with pytest.raises(ValueError, match="allows no action"):
        actions.random_actions(np.random.default_rng(0), 3, NUM_ACTIONS, mask)
    with pytest.raises(TypeError, match="bool"):
        actions.greedy_actions(q_values, mask.astype(np.int32))


def test_a_row_without_valid_actions_counts_every_action_valid_in_tf():
    q_values, _ = random_q_and_mask((4, NUM_ACTIONS), seed=6)
    mask = np.zeros((4, NUM_ACTIONS), bool)
    mask[0, 1] = True  # row 0 keeps one valid action, rows 1-3 have none
    greedy = actions.greedy_actions_tf(tf.constant(q_values), tf.constant(mask)).numpy()
    best = actions.max_q_values_tf(tf.constant(q_values), tf.constant(mask)).numpy()
    assert greedy[0] == 1 and best[0] == q_values[0, 1]
    np.testing.assert_array_equal(greedy[1:], q_values[1:].argmax(1))
    np.testing.assert_array_equal(best[1:], q_values[1:].max(1))
    drawn = actions.random_actions_tf(tf.random.Generator.from_seed(7), [4000], NUM_ACTIONS,
                                      tf.zeros([4000, NUM_ACTIONS], tf.bool)).numpy()
    assert set(drawn.tolist()) == set(range(NUM_ACTIONS))


def test_the_tf_flavour_runs_in_a_graph_of_unknown_batch_size():
    q_values, mask = random_q_and_mask((10, NUM_ACTIONS), seed=8)

    @tf.function(input_signature=[tf.TensorSpec([None, NUM_ACTIONS], tf.float32), tf.TensorSpec([None, NUM_ACTIONS],
                                                                                               tf.bool)])
    def choose(q, valid):
        return actions.greedy_actions_tf(q, valid), actions.max_q_values_tf(q, valid)

    greedy, best = choose(q_values, mask)
    np.testing.assert_array_equal(greedy.numpy(), actions.greedy_actions(q_values, mask))
    np.testing.assert_array_equal(best.numpy(), actions.max_q_values(q_values, mask))


# The paths that choose through the module.

def old_epsilon_greedy(q_values: np.ndarray, epsilon: float, rng: np.random.Generator, steps: int) -> np.ndarray:
    """HostEpsilonGreedy as written before the module: argmax, then rng.integers over the explored envs."""
    taken = []
    for _ in range(steps):
        chosen = q_values.argmax(axis=1).astype(np.int64)
        explore = rng.random(len(chosen)) < epsilon
        if explore.any():
            chosen[explore] = rng.integers(0, NUM_ACTIONS, int(explore.sum()))
        taken.append(chosen)
    return np.stack(taken)


def test_epsilon_greedy_acts_as_before_without_a_mask_and_only_validly_with_one():
    spec = tensor_spec.BoundedTensorSpec((), tf.int64, 0, NUM_ACTIONS - 1)
    q_values, mask = random_q_and_mask((32, NUM_ACTIONS), seed=10)
    policy = HostEpsilonGreedy(FixedQ(q_values), spec, seed=11)
    np.testing.assert_array_equal(np.stack([policy.actions(None, 0.3) for _ in range(100)]),
                                  old_epsilon_greedy(q_values, 0.3, np.random.default_rng(11), 100))
    for epsilon in (0.0, 0.5, 1.0):
        chosen = np.stack([policy.actions(None, epsilon, mask) for _ in range(100)])
        assert np.take_along_axis(np.broadcast_to(mask, (100, *mask.shape)), chosen[..., None], -1).all()
    np.testing.assert_array_equal(policy.actions(None, 0.0, mask), actions.greedy_actions(q_values, mask))


def test_the_warm_up_draws_what_it_always_drew():
    spec = tensor_spec.BoundedTensorSpec((), tf.int64, 2, 2 + NUM_ACTIONS - 1)
    policy = RandomCollectPolicy(spec, num_envs=16, seed=12)
    plain = np.random.default_rng(12)
    for _ in range(20):
        drawn, q_values = policy.actions(None)
        assert q_values is None
        np.testing.assert_array_equal(drawn, plain.integers(2, 2 + NUM_ACTIONS, size=16, dtype=np.int64))


def test_held_random_actions_draw_their_holds_as_before():
    holds = HeldRandomActions(num_envs=16, minimum=1, maximum=NUM_ACTIONS, exponent=2.0, seed=13)
    plain = np.random.default_rng(13)
    plain.random(16)  # at epsilon 1 every env starts a hold: the start draws, then one action per env
    expected = plain.integers(1, 1 + NUM_ACTIONS, 16)
    np.testing.assert_array_equal(holds.actions(np.zeros(16, np.int64), 1.0), expected)


def test_initial_priorities_take_the_max_over_valid_actions():
    q_values, mask = random_q_and_mask((8, NUM_ACTIONS), seed=14)
    taken = q_values.argmax(axis=1)
    reward, discount = np.linspace(-1, 1, 8), np.ones(8)
    unmasked, masked = InitialPriorities(8, gamma=0.9), InitialPriorities(8, gamma=0.9)
    for priorities in (unmasked, masked):
        priorities.taken(q_values, taken, reward, discount)
    inflated = np.where(mask, q_values, q_values + 100.0)  # masked actions would dominate an unmasked max
    q_taken = q_values[np.arange(8), taken].astype(np.float64)
    for priorities, valid, best in ((masked, mask, q_values.max(axis=1, where=mask, initial=-np.inf)),
                                    (unmasked, None, inflated.max(axis=1))):
        expected = PriorityScale()(reward + 0.9 * best.astype(np.float64) - q_taken).astype(np.float32)
        np.testing.assert_array_equal(priorities.closing(inflated, valid), expected)


def test_advantage_learnings_gap_is_the_graph_it_was():
    agent = resolved_builder(LearnerConfig(env_id="CartPole-v1", action_gap_alpha=0.5, batch_size=8)).agent.agent
    for variable in agent._target_q_network.variables:  # a target network unlike the online one
        variable.assign(variable + tf.random.stateless_normal(variable.shape, seed=(1, 2), stddev=0.3))
    time_steps = tensor_spec.sample_spec_nest(agent.time_step_spec, outer_dims=(8,), seed=3)
    time_steps = time_steps._replace(observation=tf.random.stateless_uniform([8, 4], seed=(4, 5), minval=-1))
    chosen = tf.constant([0, 1, 1, 0, 1, 0, 0, 1], tf.int64)
    online, _ = agent._q_network(time_steps.observation, step_type=time_steps.step_type)
    target, _ = agent._target_q_network(time_steps.observation, step_type=time_steps.step_type)
    gap = tf.reduce_max(target, axis=-1) - common.index_with_actions(target, tf.cast(chosen, tf.int32))
    expected = common.index_with_actions(online, tf.cast(chosen, tf.int32)) + 0.5 * gap
    assert float(tf.reduce_max(gap)) > 0.05
    np.testing.assert_array_equal(agent._compute_q_values(time_steps, chosen).numpy(), expected.numpy())
