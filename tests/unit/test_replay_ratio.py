"""The auto replay ratio: the rule, and the real env timing it follows (real envs, real Reverb tables)."""

import pytest

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.builder import DqnBuilder
from dqn.envs.making import EnvOptions
from dqn.envs.random_play import measure_step_seconds
from dqn.replay_layout.items import REPLAY_TABLE
from dqn.replay_layout.tables import (
    DEFAULT_SAMPLES_PER_INSERT,
    MAX_AUTO_SAMPLES_PER_INSERT,
    auto_samples_per_insert,
)
from dqn.settings.config import CommonConfig
from replay_server.tables import table_mismatches


@pytest.mark.parametrize(("step_s", "ratio"), [
    (5e-6, 4.0), (50e-6, 4.0), (199e-6, 4.0),   # classic control, Box2D, grid games: the default
    (200e-6, 8.0), (500e-6, 16.0), (0.8e-3, 32.0), (20e-3, 32.0), (5.0, 32.0),
])
def test_the_ratio_rises_with_the_env_step_cost_in_powers_of_two_up_to_the_ceiling(step_s, ratio):
    assert auto_samples_per_insert(step_s) == ratio


def test_the_ratio_never_falls_as_the_env_gets_slower():
    costs = [i * 1e-5 for i in range(1, 2000)]
    ratios = [auto_samples_per_insert(c) for c in costs]
    assert ratios == sorted(ratios)
    assert ratios[0] == DEFAULT_SAMPLES_PER_INSERT and ratios[-1] == MAX_AUTO_SAMPLES_PER_INSERT


def test_a_step_of_a_slow_env_is_timed_near_its_true_cost():
    step_s = measure_step_seconds("tests.user_envs:SlowCartPole-v0", EnvOptions(), call_limit_s=5.0, budget_s=0.3)
    assert 0.002 <= step_s < 0.006


def _replay_ratio(builder: DqnBuilder) -> float:
    replay = next(table for table in builder.make_tables() if table.name == REPLAY_TABLE)
    return replay.info.rate_limiter_info.samples_per_insert


def test_auto_gives_a_slow_env_a_higher_ratio_and_cartpole_the_default():
    slow = DqnBuilder(CommonConfig(env_id="tests.user_envs:SlowCartPole-v0", fc_layer_params=(8,)))
    fast = DqnBuilder(CommonConfig(env_id="CartPole-v1", fc_layer_params=(8,)))
    assert _replay_ratio(slow) == MAX_AUTO_SAMPLES_PER_INSERT
    assert _replay_ratio(fast) == DEFAULT_SAMPLES_PER_INSERT


def test_an_explicit_ratio_is_kept_for_a_slow_env():
    builder = DqnBuilder(CommonConfig(env_id="tests.user_envs:SlowCartPole-v0", fc_layer_params=(8,),
                                      samples_per_insert=6.0))
    assert _replay_ratio(builder) == 6.0


def test_an_env_that_hangs_while_timed_gets_the_default_within_the_call_limit(caplog):
    builder = DqnBuilder(CommonConfig(env_id="tests.user_envs:AlwaysHangingCartPole-v0", fc_layer_params=(8,),
                                      env_call_timeout_s=0.5))
    assert builder.samples_per_insert == DEFAULT_SAMPLES_PER_INSERT
    assert "timing the env failed (EnvCallTimeout" in caplog.text


def test_a_restart_with_auto_keeps_the_checkpoints_ratio_and_an_explicit_ratio_must_match():
    config = CommonConfig(fc_layer_params=(8,))
    builder = DqnBuilder(config)
    restored = {t.name: t.info for t in builder.layout.make_tables(builder.table_signatures(), 32.0)}
    now = builder.layout.make_tables(builder.table_signatures(), 4.0)
    assert table_mismatches(now, restored, auto_ratio=True) == []
    assert table_mismatches(now, restored) == [
        "replay.rate_limiter.samples_per_insert is 32.0 in the checkpoint, 4.0 in the config"]
