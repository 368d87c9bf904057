"""Fault matrix rows with the whole system running (RELIABILITY.md): F1-F5, F9, F10. Kills by recorded PID only."""

import re
import time

import pytest
import reverb
import tensorflow as tf
from reverb.cc import schema_pb2

from dqn.replay_layout.tables import REPLAY_TABLE
from tests.conftest import health_status, wait_until

pytestmark = pytest.mark.integration


def test_F1_kill_one_actor_and_restart_it(system_factory):
    system = system_factory()
    system.start_learner()
    victim, survivor = system.start_actor(0), system.start_actor(1)
    system.wait_training(50)
    system.wait_items("actor-1", 100)
    survivor_pid = survivor.pid

    victim.kill()
    step_at_kill, items_at_kill = system.train_step(), system.items("actor-1")
    system.wait_training(step_at_kill + 50)  # the learner keeps training
    system.wait_items("actor-1", items_at_kill + 100)  # the other actor keeps collecting
    step_at_restart = system.train_step()

    restarted = system.start_actor(0)
    wait_until(lambda: system.progress("actor-0").get("weights_train_step", -1) >= step_at_restart - 25, 90,
               "the restarted actor to use current weights")
    system.wait_items("actor-0", 0)
    assert survivor.alive() and survivor.pid == survivor_pid
    assert restarted.alive() and system.roles["learner"].alive()


def test_F2_all_actors_gone_for_a_while(system_factory):
    system = system_factory()
    learner = system.start_learner("--rpc-timeout-s", "3")
    actors = [system.start_actor(0), system.start_actor(1)]
    system.wait_training(50)
    for actor in actors:
        actor.kill()
    gone_at = time.monotonic()
    # No inserts: the learner neither crashes nor exits, and says so (no_data_timeout_s=3 in these tests).
    wait_until(lambda: "no new data" in learner.log(), 60, "the learner to report 'no new data'")
    outage_s = 10  # three deadlines of a remote call (3 s here), three of the no-data report: any would have fired
    while time.monotonic() - gone_at < outage_s:
        assert learner.alive(), learner.log()[-3000:]
        time.sleep(2)
    step_before = system.train_step()
    system.start_actor(0)
    system.start_actor(1)
    system.wait_items("actor-0", 100)
    system.wait_training(step_before + 50)
    assert learner.alive()


def test_F3_kill_learner_and_restart_resumes_from_checkpoint(system_factory):
    system = system_factory()
    learner = system.start_learner()
    system.start_actor(0)
    system.wait_training(450)  # checkpoints every 200 steps: at least two exist
    learner.kill()
    killed_at = system.train_step()
    restarted = system.start_learner()
    wait_until(lambda: "learner starting at train step" in restarted.log(), 90, "the learner to restart")
    resumed = int(re.search(r"learner starting at train step (\d+)", restarted.log()).group(1))
    assert resumed % 200 == 0 and killed_at - 200 - 25 <= resumed <= killed_at  # never back more than 1 interval
    # It re-publishes and the actor picks the new weights up.
    wait_until(lambda: system.progress("actor-0").get("weights_train_step", -1) >= resumed, 90,
               "the actor to use the restarted learner's weights")
    system.wait_training(resumed + 50)


def test_F4_sigterm_learner_checkpoints_and_resumes_exactly(system_factory):
    system = system_factory()
    learner = system.start_learner()
    system.start_actor(0)
    system.wait_training(60)
    assert learner.terminate() == 0
    stopped_at = system.progress("learner")["train_step"]
    restarted = system.start_learner()
    wait_until(lambda: "learner starting at train step" in restarted.log(), 90, "the learner to restart")
    assert f"learner starting at train step {stopped_at} " in restarted.log()


def test_F5_kill_replay_server_and_restart_with_its_checkpoint(system_factory):
    system = system_factory()
    learner = system.start_learner()
    actor = system.start_actor(0)
    system.wait_training(50)
    checkpoint = reverb.Client(system.server.address).checkpoint()
    # Items of every table (replay and the control tables) are PrioritizedItem records in items.tfrecord.
    records = tf.data.TFRecordDataset(f"{checkpoint}/items.tfrecord", "ZLIB")
    checkpointed_replay_items = sum(schema_pb2.PrioritizedItem.FromString(record.numpy()).table == REPLAY_TABLE
                                    for record in records)
    system.server.process.kill()
    time.sleep(5)
    server = system.restart_server()
    ready_at = time.monotonic()
    restored = re.search(r"restored replay: size=(\d+)", server.process.log())
    assert restored and int(restored.group(1)) == checkpointed_replay_items > 0
    step_at_ready = system.train_step()
    wait_until(lambda: system.train_step() > step_at_ready + 25, 45, "training to resume within 45 s of ready")
    items = system.items("actor-0")
    system.wait_items("actor-0", items + 50, timeout_s=45)
    assert learner.alive() and actor.alive()
    assert time.monotonic() - ready_at < 90


def test_F9_actor_and_evaluator_started_before_the_learner_wait_then_work(system_factory):
    system = system_factory()
    actor = system.start_actor(0)
    evaluator = system.start_evaluator()
    wait_until(lambda: system.progress("actor-0").get("status", "").startswith("waiting for first weights"), 90,
               "the actor's visible waiting status")
    wait_until(lambda: "waiting for first weights" in evaluator.log(), 60, "the evaluator's waiting message")
    assert actor.alive() and evaluator.alive()
    system.start_learner()
    wait_until(lambda: system.progress("actor-0").get("weights_train_step", -1) >= 0, 90, "the actor's first weights")
    wait_until(lambda: "eval train_step=" in evaluator.log(), 120, "the first evaluation")


def test_F10_killing_the_evaluator_does_not_affect_training(system_factory):
    system = system_factory()
    learner = system.start_learner("--health-port", "0")
    system.start_actor(0)
    evaluator = system.start_evaluator()
    wait_until(lambda: "eval train_step=" in evaluator.log(), 120, "an evaluation")
    evaluator.kill()
    step = system.train_step()
    system.wait_training(step + 100)
    assert learner.alive() and system.roles["actor-0"].alive()
    assert health_status(system.server.health_port) == "SERVING"
