"""Every path that chooses an action takes only valid ones, counted: collect, warm-up, holds, evaluation, export.

The Q-network is set to prefer action 0 (value 0 of every dimension) by far, and action 0 is invalid in about half
the observations: a path that ignored the mask would take invalid actions at once (each test checks that it would).
Every action is checked against the mask of the observation it was chosen for, on the service's real vector env.
"""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.policies import policy_saver

import tests.action_envs  # noqa: F401 - registers the envs
from dqn.envs.making import EnvOptions
from dqn.model.actions import taken_q_values
from dqn.model.agent import illegal_target_actions_tf
from dqn.model.policy_export import play_exported_policy
from dqn.resolve import resolved_builder
from dqn.settings.config import ActorConfig
from evaluator.episodes import make_episode_runner

DECIDED = {"observation_history": 1, "image_encoding": "scaled", "samples_per_insert": 4.0}
#: One env of each layout: a Discrete with its mask in a Dict, a flat product with a per-dimension info mask, a
#: branching layout with a per-dimension Dict mask, and a branching layout whose narrower dimension is padded.
ENVS = ["DictMask-v0", "SmallMultiDiscrete-v0", "LargeMultiDiscrete-v0", "UnevenMultiDiscrete-v0"]


def builder_for(env: str, **settings):
    """The resolved builder of a test env, its Q-networks preferring action 0 (a padded value in a narrower head)."""
    config = ActorConfig(env_id=f"tests.action_envs:{env}", fc_layer_params=(16,), **{**DECIDED, **settings})
    builder = resolved_builder(config)
    agent = builder.agent.agent
    for network in (agent._q_network, agent._target_q_network):
        head = network.layers[-1]
        bias = np.zeros(head.bias.shape, np.float32)
        padding = builder.agent.valid_actions.padding
        if builder.agent.valid_actions.action_shape:  # branching: value 0 of every head
            bias = bias.reshape(builder.agent.valid_actions.q_shape)
            bias[:, 0] = 10.0
            if padding is not None:  # a narrower head's values all below their mean: its padding (0 - mean) wins
                narrow = ~padding.all(axis=1)
                bias[narrow] = np.where(padding[narrow], -10.0, 0.0)
        else:
            bias[0] = 10.0
        head.kernel.assign(tf.zeros_like(head.kernel))
        head.bias.assign(bias.reshape(head.bias.shape))
    return builder


def play(builder, choose, steps: int = 40, num_envs: int = 8) -> tuple[int, int]:
    """(illegal actions taken by `choose`, those an unmasked argmax would have taken) on the run's vector env."""
    valid = builder.agent.valid_actions
    network = builder.make_evaluation_policy()
    env = builder.make_envs(num_envs, seed=1)
    time_step, illegal, unmasked = env.reset(), 0, 0
    for _ in range(steps):
        mask = valid.mask(time_step.observation)
        action = choose(time_step)
        illegal += valid.illegal(action, mask)
        q_values = network.q_values(valid.network_observation(time_step.observation))
        unmasked += valid.illegal(q_values.argmax(axis=-1) + valid.minimum, mask)
        time_step = env.step(action)
    env.close()
    return illegal, unmasked


@pytest.mark.parametrize("env", ENVS)
def test_collect_warm_up_and_held_random_actions_take_only_valid_actions(env):
    builder = builder_for(env)
    warmup = builder.make_warmup_policy(8, seed=3)
    collect = builder.make_collect_policy(8, seed=3)
    for policy, epsilon in ((warmup, 1.0), (collect, 0.0), (collect, 0.5), (collect, 1.0)):
        policy.set_epsilon(epsilon)
        illegal, unmasked = play(builder, lambda step, policy=policy: policy.actions(step)[0])
        assert illegal == 0 and unmasked > 20, (policy, epsilon, unmasked)


@pytest.mark.parametrize("env", ["DictMask-v0", "SmallMultiDiscrete-v0"])
def test_epsilon_greedy_without_holds_and_tf_agents_graph_policy_take_only_valid_actions(env):
    for settings in ({"epsilon_hold_exponent": 0.0}, {"epsilon_hold_exponent": 0.0, "inference": "graph"}):
        builder = builder_for(env, **settings)
        policy = builder.make_collect_policy(8, seed=4, q_values="inference" in settings)
        assert policy.runs_in == ("graph" if "inference" in settings else "numpy")
        for epsilon in (0.0, 0.5, 1.0):
            policy.set_epsilon(epsilon)
            illegal, unmasked = play(builder, lambda step, policy=policy: policy.actions(step)[0])
            assert illegal == 0 and unmasked > 20, (settings, epsilon)


@pytest.mark.parametrize("env", ENVS)
def test_evaluation_episodes_take_only_valid_actions(env):
    builder = builder_for(env)
    for epsilon in (0.0, 0.3):
        episodes = make_episode_runner(builder.make_evaluation_policy(), builder.agent.action_spec,
                                       builder.make_envs(4), epsilon=epsilon, valid=builder.agent.valid_actions)
        episodes.run(seed=5)
        assert episodes.illegal_actions == 0 and episodes.whole_episodes == 4
        episodes.run_random(seed=6)  # random play, the score a kept policy must beat: valid actions only too
        assert episodes.illegal_actions == 0 and episodes.whole_episodes == 4
        episodes.close()
    _, unmasked = play(builder, lambda step: np.zeros((8, *builder.agent.valid_actions.action_shape), np.int64))
    assert unmasked > 20


@pytest.mark.parametrize("env", ["DictMask-v0", "SmallMultiDiscrete-v0", "LargeMultiDiscrete-v0"])
def test_the_learners_target_bootstraps_from_valid_actions_only(env):
    builder = builder_for(env)
    bundle, valid = builder.agent, builder.agent.valid_actions
    env_ = builder.make_envs(32, seed=6)
    time_step = tf.nest.map_structure(tf.constant, env_.reset())
    env_.close()
    assert int(illegal_target_actions_tf(bundle, time_step)) == 0
    # The TD target's value: the max over valid actions (the mean over dimensions of each one's, branching).
    next_values = bundle.agent._compute_next_q_values(time_step, ())
    q_values = builder.make_evaluation_policy().q_values(valid.network_observation(time_step.observation))
    mask = valid.mask(tf.nest.map_structure(lambda part: part.numpy(), time_step.observation))
    best = np.where(mask, q_values, -np.inf).max(axis=-1)
    np.testing.assert_allclose(next_values.numpy(), best.mean(axis=-1) if best.ndim > 1 else best, rtol=1e-5)
    # A target that ignored the masks (online and target networks hold the same weights here) would bootstrap
    # from forbidden actions in many rows.
    assert valid.illegal(q_values.argmax(axis=-1), mask) > 5
    forbidden = ~mask[..., 0]  # where the favoured value 0 (Q about 10) is forbidden, the max never counts it
    assert forbidden.any() and (best[forbidden] < 5).all()


@pytest.mark.parametrize(("env", "form_check"), [
    ("SmallMultiDiscrete-v0", lambda action: action.shape == (3, 2)),
    ("LargeMultiDiscrete-v0", lambda action: action.shape == (3, 4)),
    ("TupleActions-v0", lambda action: isinstance(action, tuple) and [part.shape for part in action] == [(3,), (3,)]),
])
def test_the_exported_policy_returns_the_envs_own_actions_and_only_valid_ones(env, form_check, tmp_path):
    builder = builder_for(env)
    saver = policy_saver.PolicySaver(builder.make_export_policy(), batch_size=None)
    saver.save(str(tmp_path / "policy"))
    loaded = tf.saved_model.load(str(tmp_path / "policy"))
    envs = builder.make_envs(3, seed=7)
    action = loaded.action(tf.nest.map_structure(tf.constant, envs.reset())).action
    action = tf.nest.map_structure(lambda part: part.numpy(), action)
    assert form_check(action), action
    space = tests.action_envs.PickTheTarget(**tests.action_envs.ENVS[env]).action_space
    actions = [tuple(int(part[i]) for part in action) if isinstance(action, tuple) else action[i] for i in range(3)]
    assert all(space.contains(np.asarray(a, np.int64) if not isinstance(a, tuple) else a) for a in actions), actions
    envs.close()
    returns, illegal = play_exported_policy(str(tmp_path / "policy"), builder.config.env_id, 4, seed=8,
                                            options=EnvOptions.from_config(builder.config))
    assert illegal == 0 and len(returns) == 4


def test_branching_values_past_a_narrower_dimension_are_never_chosen():
    builder = builder_for("UnevenMultiDiscrete-v0")
    valid = builder.agent.valid_actions
    assert valid.q_shape == (4, 9) and not valid.masked and valid.padding[3].tolist() == [True] * 4 + [False] * 5
    q_values = builder.make_evaluation_policy().q_values(np.zeros((2, 31), np.float32))  # 9 + 9 + 9 + 4 one-hot values
    assert q_values[:, 3, 4:].min() > q_values[:, 3, :4].max()  # padding is what the network prefers
    chosen = valid.greedy(q_values, valid.mask({"x": np.zeros((2, 1))}))
    assert chosen.tolist() == [[0, 0, 0, 0]] * 2
    np.testing.assert_array_equal(taken_q_values(q_values, chosen)[:, 3], q_values[:, 3, 0])


def test_a_recurrent_policys_in_graph_evaluation_counts_and_takes_only_valid_actions():
    builder = builder_for("DictMask-v0", lstm_size=(8,), envs_per_item=1)
    episodes = make_episode_runner(builder.make_evaluation_policy(), builder.agent.action_spec, builder.make_envs(4),
                                   valid=builder.agent.valid_actions)
    assert episodes.describe() == "inside the graph (recurrent policy)"
    episodes.run(seed=9)
    assert episodes.illegal_actions == 0 and episodes.whole_episodes == 4
    episodes.run_random(seed=10)  # stepped from Python on the same envs
    assert episodes.illegal_actions == 0 and episodes.whole_episodes == 4
    episodes.run(seed=9)  # and the in-graph loop still runs after it
    assert episodes.illegal_actions == 0 and episodes.whole_episodes == 4
    episodes.close()
    # The count itself: a policy built without the mask (action_mask none) is caught taking forbidden actions.
    ignoring = builder_for("DictMask-v0", lstm_size=(8,), envs_per_item=1, action_mask="none")
    episodes = make_episode_runner(ignoring.make_evaluation_policy(), ignoring.agent.action_spec,
                                   ignoring.make_envs(4), valid=builder.agent.valid_actions)
    episodes.run(seed=9)
    assert episodes.illegal_actions > 0
    episodes.close()


def test_branching_heads_learn_against_one_target_the_mean_of_their_losses():
    agent = builder_for("LargeMultiDiscrete-v0").agent.agent
    q_values = tf.constant([[1.0, 2.0, 3.0, 4.0]])  # Q_d(s, a_d) of the 4 heads
    loss, error = agent._td_loss(q_values, tf.constant([2.0]), tf.constant([1.0]), tf.constant([0.5]))
    # y = 1 + 0.5 x 2 = 2; per head y - Q_d = 1, 0, -1, -2; Huber 0.5, 0, 0.5, 1.5
    np.testing.assert_allclose(loss.numpy(), [0.625])
    np.testing.assert_allclose(error.numpy(), [1.0])
