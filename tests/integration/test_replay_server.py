"""Replay server as a real subprocess: TF-Agents writes and samples, checkpoint/restore, health, busy port."""

import pathlib
import time

import numpy as np
import pytest
import reverb
from tf_agents.drivers import py_driver
from tf_agents.policies import random_py_policy
from tf_agents.replay_buffers import reverb_replay_buffer, reverb_utils

from bench.single_env import GymnasiumEnvironment
from dqn.remote.weights_puller import WeightsPuller
from dqn.remote.weights_wire import publish_weights
from dqn.replay_layout.items import REPLAY_TABLE, VARIABLES_TABLE
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig
from tests.conftest import ReplayServer, emptied, health_status, run_cli, wait_until

pytestmark = pytest.mark.integration

# These tests write without a learner sampling: a samples-per-insert limiter (on by default) would hold the
# writes back once inserts run ahead of samples, so the server runs with only a min-size limiter here.
NO_LIMITER = ("--samples-per-insert", "0")
#: TF-Agents' observer writes one env per item: the server's layout must be that one (the default is blocks).
PER_ENV_ITEMS = ("--envs-per-item", "1")


@pytest.fixture(scope="module")
def shared_per_env_server(module_spawn, tmp_path_factory):
    return ReplayServer(module_spawn, tmp_path_factory.mktemp("per-env") / "run", *NO_LIMITER, *PER_ENV_ITEMS,
                        "--replay-min-size", "10")


@pytest.fixture
def per_env_server(shared_per_env_server):
    """A per-env-items server with an empty table, shared by the tests that only write items and sample them."""
    return emptied(shared_per_env_server, REPLAY_TABLE)


@pytest.fixture(scope="module")
def shared_server(module_spawn, tmp_path_factory):
    return ReplayServer(module_spawn, tmp_path_factory.mktemp("default") / "run", *NO_LIMITER)


@pytest.fixture
def server(shared_server):
    """A server of the default layout with empty tables, shared by the tests that neither stop nor restart it."""
    return emptied(shared_server, REPLAY_TABLE, VARIABLES_TABLE)


def table_size(address, table=REPLAY_TABLE):
    return reverb.Client(address).server_info(timeout=10)[table].current_size


def write_with_tf_agents_observer(address, steps):
    """Collects `steps` random CartPole steps through TF-Agents' own driver + ReverbAddTrajectoryObserver."""
    bundle = resolved_builder(CommonConfig(envs_per_item=1)).agent
    env = GymnasiumEnvironment("CartPole-v1", seed=0)
    observer = reverb_utils.ReverbAddTrajectoryObserver(reverb.Client(address), REPLAY_TABLE, sequence_length=2)
    policy = random_py_policy.RandomPyPolicy(env.time_step_spec(), env.action_spec())
    py_driver.PyDriver(env, policy, observers=[observer], max_steps=steps).run(env.reset())
    observer.flush()
    return bundle


def test_items_from_tf_agents_observer_round_trip_through_as_dataset(per_env_server):
    server = per_env_server
    bundle = write_with_tf_agents_observer(server.address, steps=200)
    assert table_size(server.address) > 150  # 200 steps minus one per episode start
    buffer = reverb_replay_buffer.ReverbReplayBuffer(
        bundle.agent.collect_data_spec, REPLAY_TABLE, sequence_length=2, server_address=server.address)
    dataset = buffer.as_dataset(sample_batch_size=16, num_steps=2, num_parallel_calls=2).prefetch(2)
    experience, _ = next(iter(dataset))
    assert experience.observation.shape == (16, 2, 4)
    assert experience.action.shape == (16, 2)
    # The sampled batch trains the agent unchanged.
    loss = bundle.agent.train(experience).loss
    assert loss.numpy() >= 0


@pytest.mark.parametrize("pipeline, streams", [("streams", 1), ("streams", 4), ("as_dataset", 3)])
def test_learner_dataset_pairs_each_key_with_its_item(per_env_server, pipeline, streams):
    """Both learner input pipelines give [batch, 2, ...] items with one sample info per item, correctly paired.

    The streams pipeline reshapes per-stream batches into one; a mix-up there would pair a key with another
    item's data, and the same key would then show different data in different batches.
    """
    import dataclasses

    from dqn.settings.config import LearnerConfig
    from tests.helpers import make_dataset

    server = per_env_server
    write_with_tf_agents_observer(server.address, steps=300)
    config = dataclasses.replace(LearnerConfig(replay_address=server.address, batch_size=32, envs_per_item=1),
                                 replay_dataset=pipeline,
                                 num_parallel_calls=streams, train_steps_per_call=2)
    iterator = iter(make_dataset(config))
    seen = {}
    for _ in range(20):
        experience, info = next(iterator)
        assert experience.observation.shape == (64, 2, 4) and experience.action.shape == (64, 2)
        assert info.key.shape == info.probability.shape == info.table_size.shape == (64,)
        assert (info.probability.numpy() > 0).all() and (info.table_size.numpy() > 150).all()
        for key, observation in zip(info.key.numpy(), experience.observation.numpy(), strict=True):
            assert seen.setdefault(int(key), observation.tobytes()) == observation.tobytes()
    assert len(seen) > 150  # most of the table was drawn, so mismatched pairs had every chance to show


def test_signatures_are_identical_in_every_process(server):
    builder = resolved_builder(CommonConfig())  # built here, in the test process, from config alone
    bundle = builder.agent
    info = reverb.Client(server.address).server_info(timeout=10)
    signatures = builder.table_signatures()
    assert info[REPLAY_TABLE].signature == signatures[REPLAY_TABLE]
    assert info[VARIABLES_TABLE].signature == signatures[VARIABLES_TABLE]
    # A publish with this process's variables is accepted by the server's signature.
    publish_weights(reverb.Client(server.address), [v.numpy() for v in bundle.policy_variables], 5)
    assert table_size(server.address, VARIABLES_TABLE) == 1


def test_sigterm_checkpoints_and_restart_restores(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, *PER_ENV_ITEMS, "--checkpoint-interval-s", "0")
    write_with_tf_agents_observer(server.address, steps=120)
    stored = table_size(server.address)
    assert stored > 0
    assert health_status(server.health_port) == "SERVING"
    assert server.process.terminate(timeout_s=60) == 0
    checkpoints = [p for p in (tmp_path / "run" / "replay_checkpoints").iterdir() if p.is_dir()]
    assert len(checkpoints) == 1 and (checkpoints[0] / "DONE").exists()
    assert "SIGTERM received: final checkpoint" in server.process.log()

    restarted = replay_server_factory(*NO_LIMITER, *PER_ENV_ITEMS, "--checkpoint-interval-s", "0", port=server.port)
    assert table_size(restarted.address) == stored
    assert restarted.process.terminate(timeout_s=60) == 0


def test_a_stop_after_a_checkpoint_with_nothing_new_does_not_write_it_again(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER, *PER_ENV_ITEMS, "--checkpoint-interval-s", "2")
    write_with_tf_agents_observer(server.address, steps=120)
    stored = table_size(server.address)
    written = server.process.log().count("checkpoint (periodic) written")
    wait_until(lambda: server.process.log().count("checkpoint (periodic) written") > written, 30,
               "a periodic checkpoint after the last insert")
    assert server.process.terminate(timeout_s=60) == 0
    log = server.process.log()
    assert "checkpoint (final): nothing inserted since" in log and "checkpoint (final) written" not in log

    restarted = replay_server_factory(*NO_LIMITER, *PER_ENV_ITEMS, "--checkpoint-interval-s", "0", port=server.port)
    assert table_size(restarted.address) == stored  # the periodic checkpoint held everything
    assert restarted.process.terminate(timeout_s=60) == 0


def test_sigint_is_a_clean_stop_too(replay_server_factory, tmp_path):
    import os
    import signal

    server = replay_server_factory(*NO_LIMITER)
    os.kill(server.process.pid, signal.SIGINT)
    assert server.process.wait(60) == 0
    assert list(pathlib.Path(tmp_path / "run" / "replay_checkpoints").glob("*/DONE"))


def test_second_server_on_busy_port_refuses(server, tmp_path):
    result = run_cli("replay-server", *NO_LIMITER, "--root-dir", str(tmp_path / "other"),
                     "--port", str(server.port),
                     "--health-port", "0")
    assert result.returncode == 2
    assert f"port {server.port} is already in use" in result.stderr
    assert server.process.alive()


def test_restored_checkpoint_with_other_config_is_reported(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER)
    assert server.process.terminate() == 0
    result = run_cli("replay-server", *NO_LIMITER, "--root-dir", str(tmp_path / "run"),
                     "--port", str(server.port),
                     "--health-port", "0", "--replay-max-size", "5000")
    assert result.returncode == 2
    # 100,000 and 5,000 transitions in items of 16 (the default envs_per_item).
    assert "replay.max_size is 6250 items in the checkpoint, 313 in the config" in result.stderr
    other_network = run_cli("replay-server", *NO_LIMITER, "--root-dir", str(tmp_path / "run"), "--port",
                            str(server.port), "--health-port", "0", "--layer-norm", "true")
    assert other_network.returncode == 2
    assert "variables.signature differs" in other_network.stderr  # named with the setting that changed
    assert "differ from the run that wrote it: layer_norm (then False, now True)" in other_network.stderr


def test_puller_downloads_only_what_was_published_since(server):
    """Readers may ask often: an ask with nothing new published costs no download of the weights."""
    bundle = resolved_builder(CommonConfig()).agent
    client = reverb.Client(server.address)
    variables = [v.numpy() for v in bundle.policy_variables]

    def downloads():
        return client.server_info(timeout=10)[VARIABLES_TABLE].rate_limiter_info.sample_stats.completed

    puller = WeightsPuller(server.address, timeout_s=10, min_interval_s=0.01)
    try:
        publish_weights(client, variables, 5)
        wait_until(lambda: (weights := puller.latest()) is not None and weights.train_step == 5, 20, "weights 5")
        before = downloads()
        for _ in range(20):  # asks with nothing new: no sample of the variables table
            puller.request()
            time.sleep(0.02)
        assert downloads() == before and puller.latest() is None and puller.status == "ok"
        publish_weights(client, [v + 1 for v in variables], 6)

        def arrived() -> bool:
            puller.request()
            weights = puller.latest()
            return weights is not None and weights.train_step == 6 and np.array_equal(weights.variables[0],
                                                                                      variables[0] + 1)

        wait_until(arrived, 20, "weights 6", interval_s=0.05)
        assert downloads() == before + 1
    finally:
        puller.close()
