"""Evaluation metrics get their context and each episode's final info, through the evaluator's own code path."""

import json

import numpy as np
import pytest
import tensorflow as tf

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.model.flat_weights import FlatWeights
from dqn.remote.weights_wire import PublishedWeights
from dqn.resolve import resolved_builder
from dqn.settings.config import EvaluatorConfig
from evaluator import metrics
from evaluator.best import BestPolicy
from evaluator.episodes import InGraphLoopEpisodes, PythonLoopEpisodes
from evaluator.evaluate import Evaluator, make_episodes, metric_context
from evaluator.metrics import EpisodeMetric
from tests.events import latest_scalars

SUCCEEDS = "tests.user_envs:SometimesSucceeds-v0"  # episodes of a seed divisible by 4 succeed, and earn 1


def succeeds_config(loop: str, **overrides) -> EvaluatorConfig:
    """8 evaluation episodes (8 consecutive seeds: exactly 2 succeed) on the numpy or the in-graph loop."""
    network = {"lstm_size": (8,)} if loop == "graph" else {}
    return EvaluatorConfig(env_id=SUCCEEDS, fc_layer_params=(8,), observation_history=1, action_mask="none",
                           eval_episodes=8, **network, **overrides)


def loaded_episodes(config: EvaluatorConfig, loop: str):
    """(builder, the evaluator's episodes of `config`, weights) as the evaluator role builds them."""
    tf.random.set_seed(1)
    builder = resolved_builder(config)
    episodes = make_episodes(config, builder)
    assert isinstance(episodes, InGraphLoopEpisodes if loop == "graph" else PythonLoopEpisodes)
    weights = FlatWeights(builder.agent.policy_variables).read()
    episodes.load(weights)
    return builder, episodes, weights


@pytest.mark.parametrize("loop", ["numpy", "graph"])
def test_the_success_rate_of_final_infos_is_recorded(loop, tmp_path, capsys):
    config = succeeds_config(loop)
    builder, episodes, weights = loaded_episodes(config, loop)
    best = BestPolicy(str(tmp_path), builder.agent.agent.policy, FlatWeights(builder.agent.policy_variables))
    evaluator = Evaluator(config, None, episodes, None, best, reset_requests=None, puller=None,
                          summary_dir=str(tmp_path), stop_requested=lambda: False)
    evaluation = evaluator.evaluate(PublishedWeights(weights, train_step=100))
    evaluator.record(evaluation)
    episodes.close()
    record = json.loads((tmp_path / "evals.jsonl").read_text())
    # Every step's info has is_success, True only at the end of a successful episode: 2 of 8 is the final infos'.
    assert record["metrics"]["success_rate"] == 0.25 and record["average_return"] == 0.25
    assert record["metrics"]["average_episode_length"] == pytest.approx(np.mean([3 + s % 3 for s in
                                                                                 range(config.seed + 99_991,
                                                                                       config.seed + 99_999)]))
    assert latest_scalars(tmp_path)["eval/success_rate"] == 0.25
    assert "success_rate=0.2" in capsys.readouterr().out


def test_an_env_that_reports_no_success_has_no_success_rate():
    config = EvaluatorConfig(env_id="tests.user_envs:IdleRoom-v0", fc_layer_params=(8,), observation_history=1,
                             action_mask="none", eval_episodes=3)
    _, episodes, _ = loaded_episodes(config, "numpy")
    values = episodes.run(5)
    episodes.close()
    assert "success_rate" not in values and set(values) == {"average_return", "average_episode_length"}


class ReachedTarget(EpisodeMetric):
    """A metric that needs its context: the share of episodes whose return reaches the run's target."""

    name = "reached_target"

    def compute(self, episodes):
        target = self.context.target_return
        return None if target is None else float(np.mean(episodes.returns >= target))


@pytest.mark.parametrize("loop", ["numpy", "graph"])
def test_metrics_are_built_with_the_evaluations_context(loop, monkeypatch):
    monkeypatch.setattr(metrics, "EVAL_METRICS", [*metrics.EVAL_METRICS, ReachedTarget])
    config = succeeds_config(loop, target_return=0.5)
    builder, episodes, _ = loaded_episodes(config, loop)
    context = episodes.metrics[-1].context
    assert context == metric_context(config, builder)
    assert (context.env_id, context.target_return, context.action_spec) == (SUCCEEDS, 0.5, builder.agent.action_spec)
    assert episodes.run(config.seed + 99_991)["reached_target"] == 0.25  # the 2 successes of 8 earn 1 >= 0.5
    episodes.close()
    # Without a target (the env has no reward_threshold) the metric reports nothing.
    _, untargeted, _ = loaded_episodes(succeeds_config(loop), loop)
    assert "reached_target" not in untargeted.run(config.seed + 99_991)
    untargeted.close()
