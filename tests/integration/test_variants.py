"""DQN variants as config switches, each in the unchanged topology: n-step returns, prioritized replay."""

import json

import numpy as np
import pytest
import reverb
import tensorflow as tf

from dqn.replay_layout.items import INITIAL_PRIORITY_KEY, REPLAY_TABLE
from dqn.replay_layout.priority_scale import MIN_PRIORITY
from tests.conftest import run_cli, wait_until

pytestmark = pytest.mark.integration

NO_LIMITER = ("--samples-per-insert", "0")


def sample_items(address: str, count: int) -> list:
    """Samples with their data packed back into the table's Trajectory structure."""
    client = reverb.Client(address)
    signature = client.server_info(timeout=10)[REPLAY_TABLE].signature
    samples = client.sample(REPLAY_TABLE, num_samples=count, emit_timesteps=False)
    return [sample._replace(data=tf.nest.pack_sequence_as(signature, sample.data)) for sample in samples]


@pytest.mark.parametrize("agent_flags", [("--n-step-update", "3"), ("--n-step-update", "3", "--double-dqn", "true")],
                         ids=["plain-dqn", "double-dqn"])
def test_n_step_items_hold_n_plus_one_steps_and_learner_trains(system_factory, agent_flags):
    flags = agent_flags
    system = system_factory(*NO_LIMITER, *flags)
    system.shared_flags = flags
    system.start_learner()
    system.start_actor(0)
    system.wait_training(at_least=100)
    samples = sample_items(system.server.address, 20)
    for sample in samples:
        # n + 1 = 4 steps of a block of 4 envs (the tests' envs_per_item) of CartPole's 4-vector. Windows may run
        # past an episode end (dqn/replay_layout/unpack.py); per-env windows are checked in test_nstep_windows and
        # test_block_items.
        assert sample.data.observation.shape == (4, 4, 4)
    assert system.roles["learner"].terminate() == 0
    assert system.roles["actor-0"].terminate() == 0


def test_rnn_q_network_trains_on_sequences(system_factory):
    flags = ("--lstm-size", "16", "--train-sequence-length", "6", "--envs-per-item", "1")  # RNN: per-env items
    system = system_factory(*NO_LIMITER, *flags)
    system.shared_flags = flags
    system.start_learner()
    system.start_actor(0)
    system.wait_training(at_least=100)
    system.wait_items("actor-0", system.items("actor-0") + 100)  # still collecting with the stateful policy
    for sample in sample_items(system.server.address, 20):
        assert sample.data.observation.shape == (6, 4)
        assert not (np.asarray(sample.data.step_type)[:-1] == 2).any()
    assert system.roles["learner"].terminate() == 0
    assert system.roles["actor-0"].terminate() == 0


def test_rnn_state_resets_at_every_real_episode_start():
    """Real vector envs with short episodes: wherever an env's step is FIRST, its new policy state is the one a fresh
    zero state gives; elsewhere the carried state matters. Episodes end by termination and by truncation."""
    from tf_agents.trajectories import time_step as ts

    from dqn.envs.vector_env import GymnasiumVectorEnvironment
    from dqn.resolve import resolved_builder
    from dqn.settings.config import CommonConfig

    bundle = resolved_builder(CommonConfig(lstm_size=(8,), fc_layer_params=(16,))).agent
    policy = bundle.agent.collect_policy
    env = GymnasiumVectorEnvironment("CartPole-v1", 6, seed=4, max_episode_steps=12)
    rng = np.random.default_rng(4)
    state = policy.get_initial_state(6)
    time_step = env.reset()
    starts, carried_mattered, ends = 0, 0, {"terminated": 0, "truncated": 0}
    for _ in range(60):
        step = tf.nest.map_structure(tf.constant, time_step)
        carried = policy.action(step, state)
        fresh = policy.action(step, policy.get_initial_state(6))
        first = np.asarray(time_step.step_type) == ts.StepType.FIRST
        for a, b in zip(tf.nest.flatten(carried.state), tf.nest.flatten(fresh.state), strict=True):
            np.testing.assert_allclose(a.numpy()[first], b.numpy()[first], atol=1e-6)
            carried_mattered += int(not np.allclose(a.numpy()[~first], b.numpy()[~first]))
        starts += int(first.sum())
        state = carried.state
        time_step = env.step(rng.integers(0, 2, size=6, dtype=np.int64))
        last = np.asarray(time_step.step_type) == ts.StepType.LAST
        ends["terminated"] += int((last & (np.asarray(time_step.discount) == 0)).sum())
        ends["truncated"] += int((last & (np.asarray(time_step.discount) == 1)).sum())
    env.close()
    assert starts > 6 * 3 and carried_mattered > 0  # several episode starts per env; mid-episode state carried
    assert ends["terminated"] > 0 and ends["truncated"] > 0, ends


def test_prioritized_replay_learner_writes_back_priorities(system_factory):
    flags = ("--prioritized-replay", "true", "--initial-priority", "max")
    system = system_factory(*NO_LIMITER, *flags)
    system.shared_flags = flags
    info = reverb.Client(system.server.address).server_info(timeout=10)[REPLAY_TABLE]
    assert info.sampler_options.prioritized.priority_exponent == pytest.approx(0.6)
    system.start_learner()
    system.start_actor(0)
    system.wait_training(at_least=200)

    def priorities_changed() -> bool:
        samples = sample_items(system.server.address, 300)
        # times_sampled == 1: only our own sample drew it, so it still has the priority the actor gave it.
        fresh = [s.info.priority for s in samples if s.info.times_sampled == 1]
        updated = [s.info.priority for s in samples if s.info.priority < 1.0]
        assert all(p == 1.0 for p in fresh), fresh  # new items enter at the top of the normalized scale
        return len(updated) > 20

    wait_until(priorities_changed, 60, "the learner's priority updates to reach the server")
    log = system.roles["learner"].log()
    assert "priority update failed" not in log
    assert system.roles["learner"].terminate() == 0
    assert system.roles["actor-0"].terminate() == 0


def test_actor_td_error_priorities_enter_the_table_and_learner_trains(system_factory):
    flags = ("--prioritized-replay", "true")  # initial priority auto: the actor's TD error
    system = system_factory(*NO_LIMITER, *flags)
    system.shared_flags = flags
    system.start_learner()
    system.start_actor(0)
    system.wait_training(at_least=200)
    system.wait_items("actor-0", system.items("actor-0") + 2000)  # items made with the learner's weights

    def actor_priorities_vary() -> bool:
        samples = sample_items(system.server.address, 300)
        # times_sampled == 1: only our own sample drew it, so it still has the priority the actor gave it.
        fresh = [s for s in samples if s.info.times_sampled == 1]
        for sample in fresh:
            # Block items of the tests' 4 envs, with the block's priority (its envs' largest, test_block_items).
            assert np.asarray(sample.data.observation).shape == (2, 4, 4)
            initial = np.asarray(sample.data.policy_info[INITIAL_PRIORITY_KEY])
            assert initial[0] == 0.0 and sample.info.priority == pytest.approx(initial[1])
            assert MIN_PRIORITY <= sample.info.priority <= 1.0
        return len({round(s.info.priority, 4) for s in fresh}) > 20  # the actor's own |TD errors|, not one value

    wait_until(actor_priorities_vary, 60, "items with the actor's own TD-error priorities")
    assert "priority update failed" not in system.roles["learner"].log()
    assert system.roles["learner"].terminate() == 0
    assert system.roles["actor-0"].terminate() == 0


def test_restored_uniform_table_with_prioritized_config_is_refused(replay_server_factory, tmp_path):
    server = replay_server_factory(*NO_LIMITER)
    assert server.process.terminate() == 0
    result = run_cli("replay-server", *NO_LIMITER, "--prioritized-replay", "true",
                     "--root-dir", str(tmp_path / "run"), "--port", str(server.port), "--health-port", "0")
    assert result.returncode == 2
    assert "replay.sampler is uniform in the checkpoint, prioritized(alpha=0.6) in the config" in result.stderr


def test_roles_started_apart_agree_on_an_auto_observation_history(system_factory, tmp_path):
    """Roles started apart (as on a cluster) take the replay server's decision: 2 for hidden velocities."""
    flags = ("--env-id", "bench.pomdp_envs:CartPoleNoVelocity-v0")
    system = system_factory(*NO_LIMITER, *flags)
    system.shared_flags = flags
    system.start_learner()
    system.start_actor(0)
    system.wait_training(at_least=50)
    for sample in sample_items(system.server.address, 5):
        assert sample.data.observation.shape == (2, 4, 4)  # 2 steps of 4 envs of (position, angle) x 2 observations
    for role in ("learner", "actor-0"):
        written = json.loads((tmp_path / "run" / role / "config.json").read_text())
        assert written["observation_history"] == 2, role
        assert written["samples_per_insert"] == 0.0, role  # the server's flag, adopted by roles that left it at auto
    assert system.roles["learner"].terminate() == 0
    assert system.roles["actor-0"].terminate() == 0


def test_a_role_whose_explicit_setting_differs_from_the_runs_is_refused_at_start(system_factory, tmp_path):
    """The run decided CartPole's history once (1); a learner told 2 would build another network: exit 2, named."""
    system = system_factory(*NO_LIMITER)
    result = run_cli("learner", "--root-dir", str(tmp_path / "run"), "--replay-address", system.server.address,
                     "--observation-history", "2", "--connect-timeout-s", "20")
    assert result.returncode == 2, result.stderr
    assert ("--observation-history / DQN_OBSERVATION_HISTORY: is 2 here, but the run's settings at the replay "
            f"server at {system.server.address} say 1") in result.stderr
