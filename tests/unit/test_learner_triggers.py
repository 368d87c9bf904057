"""The learner's triggers: a reset request applied by its own trigger, publishing on request, one log throttle."""

import logging
from types import SimpleNamespace

import pytest

from dqn.process.log_throttle import LogThrottle
from dqn.settings.config import LearnerConfig
from learner.stats import NoInsertWarning
from learner.triggers import IntervalTrigger, make_triggers


class RecordingPublisher:
    """Stands in for WeightsPublisher: records (train step, exploration start) of each submission."""

    def __init__(self):
        self.submitted = []

    def submit(self, variables, train_step, exploration_start=0):
        self.submitted.append((train_step, exploration_start))


def learner_triggers(learner, publisher, watcher, step=0):
    """The trigger list Learner.run builds, with the learner's own reset and publish, and no-op other work."""
    return make_triggers(learner.config, step, reset_requests=watcher,
                         applied_request=int(learner.reset_request_step.numpy()),
                         apply_reset_request=learner.apply_reset_request,
                         publish=lambda at: learner.publish(publisher, at), checkpoint=lambda _: None,
                         export=lambda _: None, write_summaries=lambda _: None, warn_no_inserts=lambda _: None)


def test_a_reset_request_takes_effect_at_the_next_train_call_whatever_the_publish_interval(tmp_path):
    from dqn.resolve import resolve_settings
    from learner.train import Learner

    config = LearnerConfig(root_dir=str(tmp_path), fc_layer_params=(32,), publish_interval=10_000,
                           checkpoint_interval=10_000, summary_interval=10_000)
    learner = Learner(resolve_settings(config))
    publisher, watcher = RecordingPublisher(), SimpleNamespace(latest=-1, received=0)
    triggers = learner_triggers(learner, publisher, watcher)

    def train_call(step):
        for trigger in triggers:
            trigger(step)

    for step in (8, 16):
        train_call(step)
    assert publisher.submitted == []  # far from the publish interval
    # The evaluator's request on behalf of its evaluation of step 16, as the watcher's thread would record it.
    watcher.latest, watcher.received = 16, 1
    train_call(24)
    assert int(learner.reset_request_step.numpy()) == 16
    assert int(learner.exploration_start.numpy()) == 24
    assert publisher.submitted == [(24, 24)], "the reset's weights and exploration start go out in the same call"
    for step in (32, 40, 48):
        train_call(step)
    assert publisher.submitted == [(24, 24)], "applied once, and no extra publications after it"
    train_call(10_000)
    assert publisher.submitted == [(24, 24), (10_000, 24)]


def test_an_applied_request_restored_from_the_checkpoint_is_not_applied_again(tmp_path):
    from dqn.resolve import resolve_settings
    from learner.train import Learner

    learner = Learner(resolve_settings(LearnerConfig(root_dir=str(tmp_path), fc_layer_params=(32,))))
    learner.reset_request_step.assign(480)
    learner.exploration_start.assign(2_000)
    publisher = RecordingPublisher()
    triggers = learner_triggers(learner, publisher, SimpleNamespace(latest=480, received=1), step=3_000)
    assert not triggers[0](3_008)
    assert int(learner.exploration_start.numpy()) == 2_000 and publisher.submitted == []
    assert triggers[0].refused.count == 0, "the applied request still in the table is not a refused one"


def test_only_requests_that_can_be_genuine_are_applied_and_the_rest_are_counted(tmp_path):
    from dqn.resolve import resolve_settings
    from learner.train import Learner

    learner = Learner(resolve_settings(LearnerConfig(root_dir=str(tmp_path), fc_layer_params=(32,))))
    learner.reset_request_step.assign(480)
    publisher, watcher = RecordingPublisher(), SimpleNamespace(latest=-1, received=0)
    trigger = learner_triggers(learner, publisher, watcher, step=3_000)[0]

    def request(step, at):
        watcher.latest, watcher.received = step, watcher.received + 1
        return trigger(at)

    assert not request(10**12, 3_008), "a step no evaluation of this learner's weights can have"
    assert not request(3_100, 3_016), "after the learner's own train step"
    assert not request(200, 3_024), "before the last applied request"
    assert trigger.refused.count == 3 and int(learner.reset_request_step.numpy()) == 480
    assert not trigger(3_032) and trigger.refused.count == 3, "each request is looked at once"
    assert request(3_000, 3_040), "a genuine request after the refused ones is applied"
    assert int(learner.reset_request_step.numpy()) == 3_000 and int(learner.exploration_start.numpy()) == 3_040
    assert not request(3_000, 3_048) and trigger.refused.count == 3, "the applied one again: not applied, not refused"
    assert learner.refused_counts()["refused_reset_requests"] == 0, "run() sets the trigger the learner reports"
    learner.reset_trigger = trigger
    assert learner.refused_counts()["refused_reset_requests"] == 3


def test_a_checkpointed_applied_request_after_the_train_step_is_healed_at_start(tmp_path):
    from dqn.resolve import resolve_settings
    from learner.train import Learner

    config = resolve_settings(LearnerConfig(root_dir=str(tmp_path), fc_layer_params=(32,)))
    learner = Learner(config)
    learner.bundle.train_step.assign(5_000)
    learner.exploration_start.assign(1_200)
    learner.reset_request_step.assign(10**12)  # what an earlier version checkpointed from a forged request
    learner.save()
    restored = Learner(config)
    assert restored.step == 5_000 and int(restored.reset_request_step.numpy()) == 1_200


def test_a_requested_interval_trigger_fires_once_at_the_next_call_and_keeps_its_interval():
    fired = []
    trigger = IntervalTrigger(100, fired.append)
    trigger(8)
    trigger.request()
    assert trigger(16) and not trigger(24)
    trigger(104)
    assert fired == [16, 104]
    never = IntervalTrigger(0, fired.append)
    never.request()
    assert never(8) and not never(16)


def test_a_log_throttle_is_ready_once_per_interval(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr("dqn.process.log_throttle.time.monotonic", lambda: now[0])
    throttle = LogThrottle(30.0)
    assert throttle.ready() and not throttle.ready()
    now[0] += 29.9
    assert not throttle.ready()
    now[0] += 0.1
    assert throttle.ready()


def test_the_no_insert_warning_reads_the_last_replay_measurement_and_shares_the_throttle(caplog):
    rates = SimpleNamespace(latest={"seconds_since_insert": 5.0})
    throttle = LogThrottle(30.0)
    warn = NoInsertWarning(rates, 30.0, throttle)
    with caplog.at_level(logging.WARNING, logger="learner"):
        warn(100)
        assert "no new data inserted" not in caplog.text
        rates.latest = {"seconds_since_insert": 45.0}
        warn(200)
        warn(300)
    assert caplog.text.count("no new data inserted for 45 s") == 1
    assert not throttle.ready(), "the warning used the throttle it shares with the wait-for-data report"


@pytest.mark.parametrize("anneal_steps, max_train_steps, step, expected", [
    (0, 1000, 0, 0.4), (0, 1000, 500, 0.7), (0, 1000, 5000, 1.0), (200, 1000, 100, 0.7), (200, 1000, -5, 0.4),
])
def test_importance_beta_is_the_old_closed_form(anneal_steps, max_train_steps, step, expected):
    from learner.priority_updates import importance_beta

    config = LearnerConfig(importance_exponent_start=0.4, importance_anneal_steps=anneal_steps,
                           max_train_steps=max_train_steps)
    fraction = min(1.0, max(0, step) / (anneal_steps or max_train_steps))
    assert importance_beta(config, step) == 0.4 + fraction * (1.0 - 0.4)  # exactly, not approximately
    assert importance_beta(config, step) == pytest.approx(expected)
