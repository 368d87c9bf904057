"""Both evaluation loops (in-graph, numpy) equal a step-by-step Python loop and feed the evaluation metrics."""

import json

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.model.flat_weights import FlatWeights
from dqn.model.graph_policy import batched_actions
from dqn.model.numpy_policy import HostQNetwork
from dqn.remote.weights_wire import PublishedWeights
from dqn.resolve import resolved_builder
from dqn.settings.config import EvaluatorConfig
from evaluator import metrics
from evaluator.best import BestPolicy
from evaluator.episodes import InGraphLoopEpisodes, PythonLoopEpisodes, make_episode_runner
from evaluator.evaluate import Evaluator, confirmation_seed
from evaluator.metrics import EpisodeMetric, EpisodeTotals, EvalMetric, MetricContext, make_metrics
from tests.events import latest_scalars


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


def averages(values: dict[str, float]) -> tuple[float, float]:
    """(average return, average episode length) from a run's metric values."""
    return values["average_return"], values["average_episode_length"]


def evaluation_policy(bundle) -> tuple:
    """(policy, action spec) as `DqnBuilder.make_evaluation_policy` picks: the numpy mirror where it is exact."""
    mirror = HostQNetwork.mirror(bundle.q_network, bundle.policy_variables)
    return (bundle.agent.policy if mirror is None else mirror), bundle.agent.action_spec


@pytest.fixture(scope="module")
def bundle():
    tf.random.set_seed(3)
    return resolved_builder(EvaluatorConfig(fc_layer_params=(16,))).agent


def randomize(bundle, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for variable in bundle.policy_variables:
        variable.assign(rng.normal(0, 1, variable.shape).astype(np.float32))


@pytest.mark.parametrize("chunk_steps", [7, 1000])
def test_graph_episodes_equal_the_python_loop(bundle, chunk_steps):
    env = GymnasiumVectorEnvironment("CartPole-v1", 6, max_episode_steps=60)
    episodes = InGraphLoopEpisodes(bundle.agent.policy, env, chunk_steps=chunk_steps)
    seen_lengths = set()
    for weights_seed in (1, 2, 3):  # different policies give different episode lengths, some truncated at 60
        randomize(bundle, weights_seed)
        returns, lengths = python_loop(bundle.agent.policy, 6, seed=11, max_episode_steps=60)
        seen_lengths.update(lengths)
        for _ in range(2):  # the same env object, reseeded: the same episodes each time
            average_return, average_length = averages(episodes.run(11))
            assert average_return == pytest.approx(returns.mean())
            assert average_length == pytest.approx(lengths.mean())
    assert len(seen_lengths) > 3  # episodes of many lengths ran (envs finish at different steps)
    episodes.close()


def test_numpy_episodes_equal_the_python_loop(bundle):
    episodes = make_episode_runner(*evaluation_policy(bundle),
                                   GymnasiumVectorEnvironment("CartPole-v1", 6, max_episode_steps=60))
    assert isinstance(episodes, PythonLoopEpisodes)  # a plain MLP: the evaluator's numpy loop
    seen_lengths = set()
    weights = FlatWeights(bundle.policy_variables)
    for weights_seed in (1, 2, 3):
        randomize(bundle, weights_seed)
        returns, lengths = python_loop(bundle.agent.policy, 6, seed=11, max_episode_steps=60)
        seen_lengths.update(lengths)
        episodes.load(weights.read())  # the numpy loop sees new weights only through load
        for _ in range(2):
            average_return, average_length = averages(episodes.run(11))
            assert average_return == pytest.approx(returns.mean())
            assert average_length == pytest.approx(lengths.mean())
    assert len(seen_lengths) > 3
    episodes.close()


def test_numpy_episodes_stop_between_steps(bundle):
    randomize(bundle, 4)
    episodes = make_episode_runner(*evaluation_policy(bundle), GymnasiumVectorEnvironment("CartPole-v1", 3))
    episodes.load(FlatWeights(bundle.policy_variables).read())
    _, full_length = averages(episodes.run(5))
    calls = []
    _, partial_length = averages(episodes.run(5, stop_requested=lambda: calls.append(1) or len(calls) > 2))
    assert full_length > 2
    assert partial_length == pytest.approx(2.0)
    episodes.close()


def test_graph_episodes_stop_between_chunks(bundle):
    randomize(bundle, 4)
    episodes = InGraphLoopEpisodes(bundle.agent.policy, GymnasiumVectorEnvironment("CartPole-v1", 3), chunk_steps=1)
    _, full_length = averages(episodes.run(5))
    calls = []
    _, partial_length = averages(episodes.run(5, stop_requested=lambda: calls.append(1) or len(calls) > 2))
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


def test_graph_episodes_carry_an_rnn_state():
    """An LSTM policy's state runs through the in-graph loop exactly as through the per-step Python loop."""
    tf.random.set_seed(5)
    rnn = resolved_builder(EvaluatorConfig(fc_layer_params=(16,), lstm_size=(8,))).agent
    randomize(rnn, 12)  # weights whose actions depend on the state: resetting it every 3 steps changes every episode
    returns, lengths = python_loop(rnn.agent.policy, 4, seed=21, max_episode_steps=40)
    episodes = InGraphLoopEpisodes(rnn.agent.policy,
                                   GymnasiumVectorEnvironment("CartPole-v1", 4, max_episode_steps=40), chunk_steps=3)
    average_return, average_length = averages(episodes.run(21))
    assert average_return == pytest.approx(returns.mean())
    assert average_length == pytest.approx(lengths.mean())
    episodes.close()
    # make_episode_runner keeps an RNN policy on the in-graph loop (the numpy mirror is feed-forward only).
    graph = make_episode_runner(*evaluation_policy(rnn), GymnasiumVectorEnvironment("CartPole-v1", 2))
    assert isinstance(graph, InGraphLoopEpisodes)
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
        episodes = InGraphLoopEpisodes(bundle.agent.policy, env, chunk_steps=7)
    else:
        episodes = make_episode_runner(*evaluation_policy(bundle), env)
        episodes.load(FlatWeights(bundle.policy_variables).read())
    average_return, average_length = averages(episodes.run(11))
    whole = lengths < fail_every
    assert episodes.cut_short == (~whole).sum() >= 1 and env.restarts >= episodes.cut_short
    assert average_return == pytest.approx(returns[whole].mean())
    assert average_length == pytest.approx(lengths[whole].mean())
    episodes.close()


def test_an_evaluation_whose_episodes_were_all_cut_short_has_no_average(bundle):
    context = MetricContext("CartPole-v1", bundle.agent.action_spec)
    kept = EpisodeTotals(np.array([3.0, 5.0]), np.array([3.0, 5.0]), np.array([True, False]),
                         ({"is_success": 1.0}, {"is_success": 0.0}))
    none_left = EpisodeTotals(np.array([3.0]), np.array([3.0]), np.array([False]), ({"is_success": 1.0},))
    expected = {"average_return": 3.0, "average_episode_length": 3.0, "success_rate": 1.0}
    for metric in make_metrics(context):
        metric.reset(2)
        metric.on_episodes(kept)
        assert metric.result() == expected.pop(metric.name)  # the cut-short episode (5, no success) is left out
        metric.on_episodes(none_left)
        assert np.isnan(metric.result())
    assert not expected


class MaxReturn(EpisodeMetric):
    """A metric as a user adds one: the best whole episode's return."""

    name = "max_return"

    def compute(self, episodes):
        return episodes.returns.max()


class StepMaxReturn(EvalMetric):
    """The same value, summed from the per-step hook (numpy loop only)."""

    name = "step_max_return"

    def reset(self, num_envs):
        self.sums, self.steps, self.value = np.zeros(num_envs), 0, float("nan")

    def on_step(self, rewards, step_types, counted):
        self.sums += np.where(counted, rewards, 0.0)
        self.steps += 1

    def on_episodes(self, episodes):
        self.value = float(self.sums[episodes.whole].max()) if episodes.whole.any() else float("nan")

    def result(self):
        return self.value


def flaky_episodes(bundle, loop: str, seed: int, cut: str):
    """(runner on 6 flaky CartPoles, returns, lengths, whole) with the longest (cut="longest") or all episodes cut."""
    import tests.flaky_env  # noqa: F401 - registers FlakyCartPole-v0 (CartPole that raises at its n-th step)

    for weights_seed in (1, 2, 3, 4, 5):  # weights whose 6 episodes differ in length
        randomize(bundle, weights_seed)
        returns, lengths = python_loop(bundle.agent.policy, 6, seed=seed, max_episode_steps=60)
        if lengths.min() < lengths.max():
            break
    fail_every = int(lengths.max() if cut == "longest" else lengths.min())
    env = GymnasiumVectorEnvironment("FlakyCartPole-v0", 6, max_episode_steps=60, fail_every=fail_every)
    policy = bundle.agent.policy if loop == "graph" else evaluation_policy(bundle)[0]
    episodes = make_episode_runner(policy, bundle.agent.action_spec, env)
    assert isinstance(episodes, InGraphLoopEpisodes if loop == "graph" else PythonLoopEpisodes)
    return episodes, returns, lengths, lengths < fail_every


def evaluator_of(tmp_path, bundle, episodes, config):
    """The evaluator role's object around `episodes`, without a replay server (no puller, no reset sender)."""
    best = BestPolicy(str(tmp_path), bundle.agent.policy, FlatWeights(bundle.policy_variables))
    return Evaluator(config, None, episodes, None, best, reset_requests=None, puller=None,
                     summary_dir=str(tmp_path), stop_requested=lambda: False)


@pytest.mark.parametrize("loop", ["graph", "numpy"])
def test_a_registered_metric_is_fed_and_recorded_without_cut_short_episodes(bundle, loop, tmp_path, monkeypatch,
                                                                           capsys):
    monkeypatch.setattr(metrics, "EVAL_METRICS", [*metrics.EVAL_METRICS, MaxReturn])  # the one registration line
    config = EvaluatorConfig(fc_layer_params=(16,))
    episodes, returns, lengths, whole = flaky_episodes(bundle, loop, config.seed + 99_991, cut="longest")
    assert 1 <= (~whole).sum() < len(whole) and returns[whole].max() < returns.max()  # the best episodes are cut
    evaluator = evaluator_of(tmp_path, bundle, episodes, config)
    evaluation = evaluator.evaluate(PublishedWeights(FlatWeights(bundle.policy_variables).read(), train_step=100))
    evaluator.record(evaluation)
    episodes.close()
    record = json.loads((tmp_path / "evals.jsonl").read_text())
    assert list(record) == ["train_step", "average_return", "metrics", "episodes", "standard_error",
                            "cut_short_episodes", "seconds", "time"]
    assert list(record["metrics"]) == ["average_episode_length", "max_return"]  # no success rate: CartPole has none
    assert record["metrics"]["max_return"] == pytest.approx(returns[whole].max())  # cut-short episodes left out
    assert record["average_return"] == pytest.approx(returns[whole].mean())
    assert (record["episodes"], record["cut_short_episodes"]) == (whole.sum(), (~whole).sum())
    scalars = latest_scalars(tmp_path)
    assert scalars["eval/max_return"] == pytest.approx(returns[whole].max())
    # The illegal-action count is written beside the metrics (CartPole has no mask: always 0).
    assert set(scalars) == {"eval/average_return", "eval/average_episode_length", "eval/max_return",
                            "eval/illegal_actions"}
    assert scalars["eval/illegal_actions"] == 0
    assert f"max_return={returns[whole].max():.1f}" in capsys.readouterr().out


def test_a_per_step_metric_is_fed_by_the_numpy_loop_and_refused_by_the_graph_loop(bundle, monkeypatch):
    monkeypatch.setattr(metrics, "EVAL_METRICS", [*metrics.EVAL_METRICS, MaxReturn, StepMaxReturn])
    episodes, returns, lengths, whole = flaky_episodes(bundle, "numpy", 11, cut="longest")
    episodes.load(FlatWeights(bundle.policy_variables).read())
    values = episodes.run(11)
    assert values["step_max_return"] == values["max_return"] == pytest.approx(returns[whole].max())
    assert episodes.metrics[-1].steps >= lengths.max()
    episodes.close()
    with pytest.raises(ValueError, match="step_max_return"):
        flaky_episodes(bundle, "graph", 11, cut="longest")


@pytest.mark.parametrize("loop", ["graph", "numpy"])
def test_an_evaluation_without_a_whole_episode_is_not_recorded(bundle, loop, tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "EVAL_METRICS", [*metrics.EVAL_METRICS, MaxReturn])
    config = EvaluatorConfig(fc_layer_params=(16,))
    episodes, *_, whole = flaky_episodes(bundle, loop, config.seed + 99_991, cut="all")
    assert not whole.any()
    evaluator = evaluator_of(tmp_path, bundle, episodes, config)
    assert evaluator.evaluate(PublishedWeights(FlatWeights(bundle.policy_variables).read(), train_step=100)) is None
    assert all(np.isnan(value) for value in episodes.run(config.seed + 99_991).values())
    assert episodes.cut_short == 6 and not (tmp_path / "evals.jsonl").exists()
    episodes.close()


def test_metric_names_must_be_distinct(monkeypatch):
    monkeypatch.setattr(metrics, "EVAL_METRICS", [*metrics.EVAL_METRICS, metrics.AverageReturn])
    with pytest.raises(ValueError, match="distinct"):
        make_metrics(MetricContext("CartPole-v1", None))


def cartpole_episodes(bundle, num_envs: int):
    """Evaluation episodes of the bundle's policy on CartPole, at most 60 steps each."""
    env = GymnasiumVectorEnvironment("CartPole-v1", num_envs, max_episode_steps=60)
    return make_episode_runner(*evaluation_policy(bundle), env)


def test_a_candidate_is_rechecked_on_fresh_episodes_then_kept_and_recorded(bundle, tmp_path, capsys):
    config = EvaluatorConfig(fc_layer_params=(16,), eval_confirm_episodes=4)

    randomize(bundle, 2)
    returns, lengths = python_loop(bundle.agent.policy, 3, seed=config.seed + 99_991, max_episode_steps=60)
    fresh, _ = python_loop(bundle.agent.policy, 4, seed=confirmation_seed(config.seed, 100), max_episode_steps=60)
    best = BestPolicy(str(tmp_path), bundle.agent.policy, FlatWeights(bundle.policy_variables))
    episodes, confirmation = cartpole_episodes(bundle, 3), cartpole_episodes(bundle, 4)
    evaluator = Evaluator(config, None, episodes, confirmation, best, reset_requests=None, puller=None,
                          summary_dir=str(tmp_path), stop_requested=lambda: False)
    evaluation = evaluator.evaluate(PublishedWeights(FlatWeights(bundle.policy_variables).read(), train_step=100))
    evaluator.recheck(evaluation)  # no target: any new best is a candidate
    evaluator.offer_best(evaluation)
    evaluator.maybe_request_reset(evaluation)  # no target: never a reset (no sender needed)
    evaluator.record(evaluation)
    record = json.loads((tmp_path / "evals.jsonl").read_text())
    assert list(record) == ["train_step", "average_return", "metrics", "episodes", "standard_error", "confirm_episodes",
                            "confirmed_return", "seconds", "time"]
    assert record["average_return"] == pytest.approx(returns.mean()) and record["episodes"] == 3
    assert record["metrics"] == {"average_episode_length": pytest.approx(lengths.mean())}
    assert record["confirm_episodes"] == 4 and record["confirmed_return"] == pytest.approx(fresh.mean())
    assert (best.train_step, best.confirmed_return) == (100, record["confirmed_return"])
    assert latest_scalars(tmp_path)["eval/confirmed_return"] == pytest.approx(fresh.mean())
    assert capsys.readouterr().out == (f"eval train_step=100 average_return={returns.mean():.1f} "
                                       f"average_episode_length={lengths.mean():.1f} "
                                       f"confirmed_return={fresh.mean():.1f}\n")
    episodes.close()
    confirmation.close()


def test_a_candidate_within_one_standard_error_of_the_target_is_rechecked_and_one_further_below_is_not(bundle,
                                                                                                       tmp_path):
    # The evaluation's episodes are a fixed sample: a policy at the target can average below it on them for good.
    config = EvaluatorConfig(fc_layer_params=(16,), eval_confirm_episodes=4)

    randomize(bundle, 2)
    returns, _ = python_loop(bundle.agent.policy, 5, seed=config.seed + 99_991, max_episode_steps=60)
    error = returns.std(ddof=1) / np.sqrt(len(returns))
    assert error > 0, returns  # episodes of different lengths: a margin to test
    episodes, confirmation = cartpole_episodes(bundle, 5), cartpole_episodes(bundle, 4)
    for target, rechecked in ((returns.mean() + 0.9 * error, True), (returns.mean() + 1.1 * error, False)):
        best = BestPolicy(str(tmp_path / str(rechecked)), bundle.agent.policy, FlatWeights(bundle.policy_variables))
        evaluator = Evaluator(config, target, episodes, confirmation, best, reset_requests=None, puller=None,
                              summary_dir=str(tmp_path), stop_requested=lambda: False)
        evaluation = evaluator.evaluate(PublishedWeights(FlatWeights(bundle.policy_variables).read(), train_step=100))
        assert evaluation.standard_error == pytest.approx(error)
        assert evaluation.record["standard_error"] == pytest.approx(error)  # evals.jsonl shows why it was re-checked
        evaluator.recheck(evaluation)
        assert (evaluation.confirmed_return is not None) == rechecked, (target, returns)
    episodes.close()
    confirmation.close()
