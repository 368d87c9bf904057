"""The evaluator keeps the best-scoring weights across restarts and exports exactly those as a SavedModel."""

import dataclasses
import errno
import gc
import json
import sys

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from dqn.envs.making import EnvOptions
from dqn.model.flat_weights import FlatWeights
from dqn.model.policy_export import policy_check, run_env_options
from dqn.resolve import resolved_builder
from dqn.settings.config import EvaluatorConfig
from evaluator.best import BestPolicy
from tests.fs import fill, small_filesystem


def weights_like(bundle, value: float) -> list[np.ndarray]:
    return [np.full(v.shape, value, np.float32) for v in bundle.policy_variables]


def keeper(directory, layers=(8,)):
    bundle = resolved_builder(EvaluatorConfig(fc_layer_params=layers)).agent
    return bundle, BestPolicy(str(directory), bundle.agent.policy, FlatWeights(bundle.policy_variables))


def test_only_a_better_return_replaces_the_best_and_the_export_holds_its_weights(tmp_path):
    bundle, best = keeper(tmp_path)
    assert not best.offer(0, 500.0, weights_like(bundle, 0.0))  # the untrained initial weights never count
    assert best.offer(100, 50.0, weights_like(bundle, 0.1))
    assert not best.offer(200, 50.0, weights_like(bundle, 0.2))  # a tie is not better
    assert best.offer(300, 120.0, weights_like(bundle, 0.3))
    assert not best.offer(400, 80.0, weights_like(bundle, 0.4))
    for variable in bundle.policy_variables:  # the evaluator's live weights move on before the export
        variable.assign(tf.zeros_like(variable))
    best.export()
    assert json.loads((tmp_path / "best_policy.json").read_text()) == {"train_step": 300, "average_return": 120.0,
                                                                       "confirmed_return": None}
    exported = tf.saved_model.load(str(tmp_path / "best_policy"))
    saved = sorted(v.numpy().ravel()[0] for v in exported.model_variables)
    np.testing.assert_allclose(saved, [0.3] * len(bundle.policy_variables))
    action = exported.action(ts.restart(tf.constant([[0.01, 0.0, 0.02, 0.0]]), batch_size=1),
                             exported.get_initial_state(1)).action.numpy()
    assert action.shape == (1,)


def test_a_restarted_evaluator_keeps_the_earlier_best_and_ignores_weights_of_another_network(tmp_path):
    bundle, best = keeper(tmp_path)
    best.offer(300, 120.0, weights_like(bundle, 0.3))
    _, restarted = keeper(tmp_path)
    assert (restarted.train_step, restarted.average_return) == (300, 120.0)
    assert not restarted.offer(500, 110.0, weights_like(bundle, 0.5))
    restarted.export()  # never exported before the restart: the loaded best is exported now
    assert json.loads((tmp_path / "best_policy.json").read_text())["train_step"] == 300
    _, other_network = keeper(tmp_path, layers=(16,))
    assert other_network.train_step is None and other_network.average_return == float("-inf")


def test_re_checked_policies_are_ranked_by_their_confirmed_return_and_keep_it_across_restarts(tmp_path):
    bundle, best = keeper(tmp_path)
    assert best.offer(100, 90.0, weights_like(bundle, 0.1), confirmed_return=70.0)
    assert best.score == 70.0
    # A lucky evaluation: its own episodes say 95, the fresh ones 60, below the kept 70. Not kept.
    assert best.is_candidate(200, 95.0)
    assert not best.offer(200, 95.0, weights_like(bundle, 0.2), confirmed_return=60.0)
    # Below the kept score on its own episodes: not even worth a re-check.
    assert not best.is_candidate(300, 65.0)
    assert best.offer(400, 80.0, weights_like(bundle, 0.4), confirmed_return=75.0)
    _, restarted = keeper(tmp_path)
    assert (restarted.train_step, restarted.average_return, restarted.confirmed_return) == (400, 80.0, 75.0)
    restarted.export()
    assert json.loads((tmp_path / "best_policy.json").read_text()) == {"train_step": 400, "average_return": 80.0,
                                                                       "confirmed_return": 75.0}


def test_policy_check_plays_the_policy_on_envs_made_as_its_run_made_them(tmp_path):
    config = EvaluatorConfig(env_id="bench.pomdp_envs:CartPoleNoVelocity-v0", observation_history=3,
                             fc_layer_params=(8,))
    builder = resolved_builder(config)
    bundle = builder.agent
    best = BestPolicy(str(tmp_path), bundle.agent.policy, FlatWeights(bundle.policy_variables))
    assert best.offer(100, 50.0, weights_like(bundle, 0.1))
    best.export()
    # As a run writes it: its settings resolved (no mask found, action_mask none).
    (tmp_path / "config.json").write_text(json.dumps(dataclasses.asdict(builder.config)))
    assert run_env_options(str(tmp_path / "best_policy")) == (config.env_id, EnvOptions(observation_history=3))
    # The policy takes 6 features (3 x position and angle); envs made by the id alone give 2 and cannot be played.
    result = policy_check(str(tmp_path / "best_policy"), None, episodes=3, seed=7)
    assert result["episodes"] == 3 and np.isfinite(result["mean_return"])


def test_a_full_disk_fails_the_best_weights_write_and_leaves_nothing_behind(tmp_path):
    """The write fails with ENOSPC and nothing else: no temporary file, no half-written archive whose finaliser
    prints a traceback later (weights larger than a write buffer, so the disk fills in the middle of them)."""
    with small_filesystem(tmp_path / "disk", size="1m") as disk:
        bundle, best = keeper(disk, layers=(256, 256))
        filler = fill(disk)
        unraisable = []
        hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
        try:
            try:
                best.offer(100, 50.0, weights_like(bundle, 0.1))
                code = None
            except OSError as error:  # leaving the handler frees the failed write's frames and what they held
                code = error.errno
            gc.collect()
        finally:
            sys.unraisablehook = hook
        assert code == errno.ENOSPC
        assert not unraisable, [str(u.exc_value) for u in unraisable]
        assert not list(disk.glob("best_weights*"))
        filler.unlink()  # room again: the next better policy is written and reads back
        assert best.offer(200, 60.0, weights_like(bundle, 0.2))
        _, restarted = keeper(disk, layers=(256, 256))
        assert (restarted.train_step, restarted.average_return) == (200, 60.0)
