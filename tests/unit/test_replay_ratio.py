"""The auto replay ratio: the rule, and the real env and learner timing it follows (real envs, real Reverb tables)."""

import json

import pytest

import tests.user_envs  # noqa: F401 - registers the user envs
from dqn.envs.making import EnvOptions
from dqn.envs.random_play import StepTimes, probe_env
from dqn.replay_layout.items import REPLAY_TABLE
from dqn.replay_layout.tables import (
    DEFAULT_SAMPLES_PER_INSERT,
    MAX_AUTO_SAMPLES_PER_INSERT,
    auto_samples_per_insert,
)
from dqn.resolve import resolve_run, resolved_builder
from dqn.settings.config import CommonConfig
from replay_server.tables import table_mismatches
from tests.helpers import auto_setting

LEARNER_S = 25e-6  # a learner that spends 25 us a sample


@pytest.mark.parametrize(("step_s", "ratio"), [
    (5e-6, 4.0), (50e-6, 4.0), (199e-6, 4.0),   # steps cheaper than 8 samples' training: the default
    (200e-6, 8.0), (500e-6, 16.0), (0.8e-3, 32.0), (20e-3, 32.0), (5.0, 32.0),
])
def test_the_ratio_rises_with_the_env_step_cost_in_powers_of_two_up_to_the_ceiling(step_s, ratio):
    assert auto_samples_per_insert(step_s, LEARNER_S) == ratio


def test_a_faster_learner_affords_a_higher_ratio_and_an_untimed_one_the_default():
    assert auto_samples_per_insert(500e-6, LEARNER_S / 4) == MAX_AUTO_SAMPLES_PER_INSERT
    assert auto_samples_per_insert(500e-6, LEARNER_S * 4) == DEFAULT_SAMPLES_PER_INSERT
    assert auto_samples_per_insert(1.0, None) == DEFAULT_SAMPLES_PER_INSERT


def test_the_ratio_never_falls_as_the_env_gets_slower():
    costs = [i * 1e-5 for i in range(1, 2000)]
    ratios = [auto_samples_per_insert(c, LEARNER_S) for c in costs]
    assert ratios == sorted(ratios)
    assert ratios[0] == DEFAULT_SAMPLES_PER_INSERT and ratios[-1] == MAX_AUTO_SAMPLES_PER_INSERT


def test_a_step_of_a_slow_env_is_timed_near_its_true_cost():
    times = StepTimes()
    probe_env("tests.user_envs:SlowCartPole-v0", EnvOptions(), call_limit_s=5.0, seed=0, observers=[times],
              budget_s=0.3)
    assert 0.002 <= times.median() < 0.006


def _replay_ratio(builder) -> float:
    replay = next(table for table in builder.make_tables() if table.name == REPLAY_TABLE)
    return replay.info.rate_limiter_info.samples_per_insert


def test_auto_times_this_machines_learner_for_a_slow_env_and_gives_cartpole_the_default(caplog):
    caplog.set_level("INFO")
    slow = resolved_builder(CommonConfig(env_id="tests.user_envs:SlowCartPole-v0", fc_layer_params=(8,)))
    assert _replay_ratio(slow) == MAX_AUTO_SAMPLES_PER_INSERT
    assert "the learner's SGD step takes" in caplog.text and "on this machine" in caplog.text
    caplog.clear()
    fast = resolved_builder(CommonConfig(env_id="CartPole-v1", fc_layer_params=(8,)))
    assert _replay_ratio(fast) == DEFAULT_SAMPLES_PER_INSERT
    assert "below 0.1 ms" in caplog.text and "SGD step" not in caplog.text  # no learner timed for a cheap env


def test_an_explicit_ratio_is_kept_for_a_slow_env():
    builder = resolved_builder(CommonConfig(env_id="tests.user_envs:SlowCartPole-v0", fc_layer_params=(8,),
                                            samples_per_insert=6.0))
    assert _replay_ratio(builder) == 6.0


def test_an_env_that_hangs_while_timed_gets_the_default_within_the_call_limit(caplog):
    assert auto_setting("tests.user_envs:AlwaysHangingCartPole-v0", "samples_per_insert",
                        env_call_timeout_s=0.5) == DEFAULT_SAMPLES_PER_INSERT
    assert "random play failed (EnvCallTimeout" in caplog.text


def test_a_restart_keeps_the_ratio_the_run_decided_first_and_an_explicit_ratio_is_checked(tmp_path):
    record = tmp_path / "config.json"
    config = CommonConfig(fc_layer_params=(8,))
    record.write_text(json.dumps({"env_id": "CartPole-v1", "samples_per_insert": 32.0}))
    assert resolve_run(config, str(record)).samples_per_insert == 32.0  # not timed again: the checkpoint's value
    assert json.loads(record.read_text())["samples_per_insert"] == 32.0
    record.write_text(json.dumps({"env_id": "Acrobot-v1", "samples_per_insert": 32.0}))  # another env's record
    assert resolve_run(config, str(record)).samples_per_insert == DEFAULT_SAMPLES_PER_INSERT
    builder = resolved_builder(config)
    restored = {t.name: t.info for t in builder.layout.make_tables(builder.table_signatures(), 32.0)}
    now = builder.layout.make_tables(builder.table_signatures(), 4.0)
    assert table_mismatches(now, restored) == [
        "replay.rate_limiter.samples_per_insert is 32.0 in the checkpoint, 4.0 in the config"]
