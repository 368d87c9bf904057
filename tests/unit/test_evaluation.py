"""Both greedy evaluation loops (in-graph, numpy) equal a step-by-step Python loop; flat weights round-trip."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.builder import DqnBuilder
from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.model.flat_weights import FlatWeights
from dqn.model.graph_policy import batched_actions
from dqn.model.numpy_policy import HostQNetwork
from dqn.settings.config import EvaluatorConfig
from evaluator.episodes import GreedyEpisodes, HostGreedyEpisodes, greedy_episodes


def python_loop(policy, num_envs: int, seed: int, max_episode_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference: one policy call from Python per step, one episode per env (what the evaluator did before)."""
    env = GymnasiumVectorEnvironment("CartPole-v1", num_envs, seed=seed, max_episode_steps=max_episode_steps)
    act = batched_actions(policy, num_envs)
    time_step = env.reset()
    returns, lengths = np.zeros(num_envs), np.zeros(num_envs)
    running = np.ones(num_envs, dtype=bool)
    while running.any():
        time_step = env.step(act(time_step))
        returns[running] += time_step.reward[running]
        lengths[running] += 1
        running &= time_step.step_type != ts.StepType.LAST
    env.close()
    return returns, lengths


def evaluation_policy(bundle) -> tuple:
    """(policy, action spec) as `DqnBuilder.make_evaluation_policy` picks: the numpy mirror where it is exact."""
    mirror = HostQNetwork.mirror(bundle.q_network, bundle.policy_variables)
    return (bundle.agent.policy if mirror is None else mirror), bundle.agent.action_spec


@pytest.fixture(scope="module")
def bundle():
    tf.random.set_seed(3)
    return DqnBuilder(EvaluatorConfig(fc_layer_params=(16,))).agent


def randomize(bundle, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for variable in bundle.policy_variables:
        variable.assign(rng.normal(0, 1, variable.shape).astype(np.float32))


@pytest.mark.parametrize("chunk_steps", [7, 1000])
def test_greedy_episodes_equal_the_python_loop(bundle, chunk_steps):
    episodes = GreedyEpisodes(bundle.agent.policy, GymnasiumVectorEnvironment("CartPole-v1", 6, max_episode_steps=60),
                              chunk_steps=chunk_steps)
    seen_lengths = set()
    for weights_seed in (1, 2, 3):  # different policies give different episode lengths, some truncated at 60
        randomize(bundle, weights_seed)
        returns, lengths = python_loop(bundle.agent.policy, 6, seed=11, max_episode_steps=60)
        seen_lengths.update(lengths)
        for _ in range(2):  # the same env object, reseeded: the same episodes each time
            average_return, average_length = episodes.run(11)
            assert average_return == pytest.approx(returns.mean())
            assert average_length == pytest.approx(lengths.mean())
    assert len(seen_lengths) > 3  # episodes of many lengths ran (envs finish at different steps)
    episodes.close()


def test_numpy_greedy_episodes_equal_the_python_loop(bundle):
    episodes = greedy_episodes(*evaluation_policy(bundle),
                               GymnasiumVectorEnvironment("CartPole-v1", 6, max_episode_steps=60))
    assert isinstance(episodes, HostGreedyEpisodes)  # a plain MLP: the evaluator's numpy loop
    seen_lengths = set()
    weights = FlatWeights(bundle.policy_variables)
    for weights_seed in (1, 2, 3):
        randomize(bundle, weights_seed)
        returns, lengths = python_loop(bundle.agent.policy, 6, seed=11, max_episode_steps=60)
        seen_lengths.update(lengths)
        episodes.load(weights.read())  # the numpy loop sees new weights only through load
        for _ in range(2):
            average_return, average_length = episodes.run(11)
            assert average_return == pytest.approx(returns.mean())
            assert average_length == pytest.approx(lengths.mean())
    assert len(seen_lengths) > 3
    episodes.close()


def test_numpy_greedy_episodes_stop_between_steps(bundle):
    randomize(bundle, 4)
    episodes = greedy_episodes(*evaluation_policy(bundle), GymnasiumVectorEnvironment("CartPole-v1", 3))
    episodes.load(FlatWeights(bundle.policy_variables).read())
    _, full_length = episodes.run(5)
    calls = []
    _, partial_length = episodes.run(5, stop_requested=lambda: calls.append(1) or len(calls) > 2)
    assert full_length > 2
    assert partial_length == pytest.approx(2.0)
    episodes.close()


def test_greedy_episodes_stop_between_chunks(bundle):
    randomize(bundle, 4)
    episodes = GreedyEpisodes(bundle.agent.policy, GymnasiumVectorEnvironment("CartPole-v1", 3), chunk_steps=1)
    _, full_length = episodes.run(5)
    calls = []
    _, partial_length = episodes.run(5, stop_requested=lambda: calls.append(1) or len(calls) > 2)
    assert full_length > 2
    assert partial_length == pytest.approx(2.0)  # two one-step chunks ran before the stop was seen
    episodes.close()


def test_flat_weights_round_trip(bundle):
    flat = FlatWeights(bundle.policy_variables)
    rng = np.random.default_rng(0)
    values = [rng.normal(size=v.shape).astype(np.float32) for v in bundle.policy_variables]
    flat.assign(values)
    for variable, value in zip(bundle.policy_variables, values, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)
    read = flat.read()
    assert [r.shape for r in read] == [tuple(v.shape) for v in bundle.policy_variables]
    for got, value in zip(read, values, strict=True):
        np.testing.assert_array_equal(got, value)


def test_flat_weights_refuse_mixed_dtypes():
    with pytest.raises(ValueError, match="one dtype"):
        FlatWeights([tf.Variable(np.zeros(2, np.float32)), tf.Variable(np.zeros(2, np.int64))])


def test_greedy_episodes_carry_an_rnn_state():
    """An LSTM policy's state runs through the in-graph loop exactly as through the per-step Python loop."""
    tf.random.set_seed(5)
    rnn = DqnBuilder(EvaluatorConfig(fc_layer_params=(16,), lstm_size=(8,))).agent
    randomize(rnn, 12)  # weights whose actions depend on the state: resetting it every 3 steps changes every episode
    returns, lengths = python_loop(rnn.agent.policy, 4, seed=21, max_episode_steps=40)
    episodes = GreedyEpisodes(rnn.agent.policy, GymnasiumVectorEnvironment("CartPole-v1", 4, max_episode_steps=40),
                              chunk_steps=3)
    average_return, average_length = episodes.run(21)
    assert average_return == pytest.approx(returns.mean())
    assert average_length == pytest.approx(lengths.mean())
    episodes.close()
    # greedy_episodes keeps an RNN policy on the in-graph loop (the numpy mirror is feed-forward only).
    graph = greedy_episodes(*evaluation_policy(rnn), GymnasiumVectorEnvironment("CartPole-v1", 2))
    assert isinstance(graph, GreedyEpisodes)
    graph.close()


@pytest.mark.parametrize("loop", ["graph", "numpy"])
def test_episodes_cut_short_by_an_env_fault_are_left_out(bundle, loop):
    import tests.flaky_env  # noqa: F401 - registers FlakyCartPole-v0 (CartPole that raises at its n-th step)

    for weights_seed in (1, 2, 3, 4, 5):  # weights whose 6 episodes differ in length
        randomize(bundle, weights_seed)
        returns, lengths = python_loop(bundle.agent.policy, 6, seed=11, max_episode_steps=60)
        if lengths.min() < lengths.max():
            break
    # Each flaky env raises at its own `fail_every`-th step: the longest episodes are cut, the others are whole.
    # Envs keep stepping after their episode ends, so some raise later on: those episodes still count.
    fail_every = int(lengths.max())
    env = GymnasiumVectorEnvironment("FlakyCartPole-v0", 6, max_episode_steps=60, fail_every=fail_every)
    if loop == "graph":
        episodes = GreedyEpisodes(bundle.agent.policy, env, chunk_steps=7)
    else:
        episodes = greedy_episodes(*evaluation_policy(bundle), env)
        episodes.load(FlatWeights(bundle.policy_variables).read())
    average_return, average_length = episodes.run(11)
    whole = lengths < fail_every
    assert episodes.cut_short == (~whole).sum() >= 1 and env.restarts >= episodes.cut_short
    assert average_return == pytest.approx(returns[whole].mean())
    assert average_length == pytest.approx(lengths[whole].mean())
    episodes.close()


def test_an_evaluation_whose_episodes_were_all_cut_short_has_no_average():
    from evaluator.episodes import averages_of_whole_episodes

    assert averages_of_whole_episodes(np.array([3.0, 5.0]), np.array([3, 5]), np.array([False, True])) == (3.0, 3.0)
    assert all(np.isnan(averages_of_whole_episodes(np.array([3.0]), np.array([3]), np.array([True]))))
