"""Sub-environments that raise: recreated, their transition never trained on, their episode not counted."""

import time

import numpy as np
import pytest
import reverb
from tf_agents.trajectories import time_step as ts

import tests.flaky_env  # noqa: F401 - registers the flaky envs
from actor.collect import mark_faulted_steps_last
from dqn.envs.faults import EnvFailed
from dqn.envs.vector_env import GymnasiumVectorEnvironment
from dqn.process.progress import EpisodeStats
from dqn.replay_layout.env_block_writer import BlockStreams
from dqn.replay_layout.env_stream_writer import TrajectoryStreams
from dqn.replay_layout.items import REPLAY_TABLE

FLAKY = "FlakyCartPole-v0"


def step_until_fault(env, limit=2_000):
    time_step = env.reset()
    for k in range(limit):
        previous = time_step
        time_step = env.step(np.full(env.batch_size, k % 2, dtype=np.int64))
        if env.faulted.any():
            return previous, time_step
    raise AssertionError("no fault within the limit")


def test_a_step_that_raises_ends_the_episode_and_the_env_comes_back():
    env = GymnasiumVectorEnvironment(FLAKY, 4, seed=0, fail_every=50)
    before, faulted_step = step_until_fault(env)
    faulted = env.faulted
    assert env.restarts == faulted.sum() >= 1
    assert (faulted_step.step_type[faulted] == ts.StepType.LAST).all()
    assert (faulted_step.reward[faulted] == 0).all() and (faulted_step.discount[faulted] == 1).all()
    # The step carries the last good observation: no state of the broken env leaks into a transition.
    assert np.array_equal(faulted_step.observation[faulted], before.observation[faulted])
    restarted = env.step(np.zeros(4, dtype=np.int64))
    assert (restarted.step_type[faulted] == ts.StepType.FIRST).all()
    assert not env.faulted[faulted].any()
    for _ in range(20):  # the recreated envs step normally
        env.step(np.ones(4, dtype=np.int64))


def test_a_reset_that_raises_is_retried_on_a_recreated_env():
    env = GymnasiumVectorEnvironment(FLAKY, 4, seed=0, fail_every=0, reset_fail_every=3)
    env.reset()
    for k in range(200):
        env.step(np.full(4, k % 2, dtype=np.int64))
    assert env.restarts > 0 and not env.faulted.any()


def test_an_env_that_never_resets_fails_with_one_line_naming_it():
    env = GymnasiumVectorEnvironment("BrokenCartPole-v0", 2, seed=0)
    with pytest.raises(EnvFailed, match=r"env 'BrokenCartPole-v0' \(sub-env 0\) failed at reset 3 times in a row.*"
                                        r"EnvBug: this env cannot reset"):
        env.reset()


def test_too_many_restarts_in_a_window_fail_naming_the_env_and_the_limit():
    env = GymnasiumVectorEnvironment("VeryFlakyCartPole-v0", 4, seed=0, max_restarts=5, restart_window=1_000)
    env.reset()
    with pytest.raises(EnvFailed, match=r"'VeryFlakyCartPole-v0' failed 8 times within 1000 env steps "
                                        r"\(limit --max-env-restarts 5\).*EnvBug"):
        for _ in range(100):
            env.step(np.ones(4, dtype=np.int64))


def test_the_dropped_episode_is_not_counted():
    env = GymnasiumVectorEnvironment(FLAKY, 4, seed=0, fail_every=50)
    stats = EpisodeStats(4)
    time_step = env.reset()
    for k in range(400):
        time_step = env.step(np.full(4, k % 2, dtype=np.int64))
        ended = time_step.step_type == ts.StepType.LAST
        before = stats.episodes
        stats.update(time_step, dropped=env.faulted)
        assert stats.episodes - before == (ended & ~env.faulted).sum()
    assert env.restarts > 0


def written_items(envs_per_item, fail_every=7, steps=60):
    """Items a real Reverb table receives from the actor's writer around faults: (step_type, observation)."""
    server = reverb.Server([reverb.Table.queue(REPLAY_TABLE, 100_000)])
    client = reverb.Client(f"localhost:{server.port}")
    env = GymnasiumVectorEnvironment(FLAKY, 4, seed=1, fail_every=fail_every)
    streams = (TrajectoryStreams(client, 4) if envs_per_item == 1 else BlockStreams(client, 4, envs_per_item))
    time_step = env.reset()
    for k in range(steps):
        action = np.full(4, k % 2, dtype=np.int64)
        next_time_step = env.step(action)
        streams.append(mark_faulted_steps_last(time_step, env.faulted), action, next_time_step)
        time_step = next_time_step
    streams.flush(10_000)
    assert env.restarts > 0
    size = client.server_info()[REPLAY_TABLE].current_size
    # Each sample is the item's steps; each step's data holds the six Trajectory fields.
    items = [(np.stack([step.data[0] for step in sample]), np.stack([step.data[1] for step in sample]))
             for sample in client.sample(REPLAY_TABLE, num_samples=size)]
    streams.close()
    server.stop()
    return items


def test_no_per_env_item_holds_the_transition_of_a_step_that_raised():
    items = written_items(envs_per_item=1)
    # A raising step repeats the last observation; a real CartPole step never does.
    repeated = [step_type[0] for step_type, observation in items if np.array_equal(observation[0], observation[1])]
    # Only the step after the fault repeats the observation, and the item starting there begins on LAST: the
    # writer makes no per-env item from it, so none is stored at all.
    assert len(items) > 100 and not repeated


def test_block_items_mask_the_transition_of_a_step_that_raised():
    items = written_items(envs_per_item=4)
    masked = 0
    for step_type, observation in items:  # [2, envs], [2, envs, 4]
        repeated = np.all(observation[0] == observation[1], axis=-1)
        # DqnAgent's loss ignores transitions whose first step is LAST (valid_mask).
        assert (step_type[0][repeated] == ts.StepType.LAST).all()
        masked += repeated.sum()
    assert masked > 0


@pytest.mark.parametrize("env_id, where", [("tests.user_envs:NaNCartPole-v0", "observation"),
                                           ("tests.user_envs:NaNRewardCartPole-v0", "reward")])
def test_non_finite_steps_are_env_faults_and_never_leave_the_vector_env(env_id, where):
    import tests.user_envs  # noqa: F401 - registers the envs

    env = GymnasiumVectorEnvironment(env_id, 4, seed=0, every=20)
    time_step = env.reset()
    faults, restarted = 0, set()
    for _ in range(300):
        time_step = env.step(np.zeros(4, dtype=np.int64))
        assert np.isfinite(time_step.observation).all() and np.isfinite(time_step.reward).all()
        for index in np.flatnonzero(env.faulted):
            assert time_step.step_type[index] == ts.StepType.LAST and time_step.reward[index] == 0.0
            restarted.add(int(index))
        faults += int(env.faulted.sum())
    assert faults >= 5 and env.restarts == faults and restarted == {0, 1, 2, 3}
    env.close()


@pytest.mark.timeout(60)
def test_a_hung_step_is_abandoned_and_the_other_envs_keep_stepping():
    import tests.user_envs  # noqa: F401 - registers the envs

    env = GymnasiumVectorEnvironment("tests.user_envs:HangingCartPole-v0", 3, seed=0, call_timeout_s=0.5,
                                     every=40)
    env.reset()
    hung, started = 0, time.monotonic()
    for _ in range(120):
        time_step = env.step(np.zeros(3, dtype=np.int64))
        hung += int(env.faulted.sum())
        assert (time_step.step_type[env.faulted] == ts.StepType.LAST).all()
    elapsed = time.monotonic() - started
    assert hung >= 2 and env.restarts >= hung
    assert elapsed < 0.5 * hung + 10  # each hang cost about its time limit, not forever
    env.close()
