"""gymnasium -> TF-Agents adapter: step types, discounts, seeding, specs, batched form, errors."""

import numpy as np
import pytest
from tf_agents.environments import utils as env_utils
from tf_agents.trajectories import time_step as ts

from bench.single_env import GymnasiumEnvironment
from dqn.envs.making import env_specs
from dqn.envs.spaces import EnvError
from dqn.envs.vector_env import GymnasiumVectorEnvironment


def run_episode(env, action=0, limit=10_000):
    steps = [env.reset()]
    while not steps[-1].is_last() and len(steps) < limit:
        steps.append(env.step(np.int64(action)))
    return steps


def test_termination_has_discount_zero():
    env = GymnasiumEnvironment("CartPole-v1", seed=1)
    steps = run_episode(env, action=0)  # always pushing left ends by termination well before 500 steps
    assert steps[0].step_type == ts.StepType.FIRST and steps[0].discount == 1.0
    assert all(s.step_type == ts.StepType.MID and s.discount == 1.0 for s in steps[1:-1])
    assert steps[-1].step_type == ts.StepType.LAST and steps[-1].discount == 0.0
    assert len(steps) < 100


def test_truncation_has_discount_one():
    env = GymnasiumEnvironment("CartPole-v1", seed=1, max_episode_steps=5)
    steps = run_episode(env, action=1)
    assert len(steps) == 6
    assert steps[-1].step_type == ts.StepType.LAST and steps[-1].discount == 1.0
    # TF-Agents' auto-reset: the step after LAST starts a new episode
    assert env.step(np.int64(1)).step_type == ts.StepType.FIRST


def test_seeding_is_reproducible():
    def observations(seed):
        env = GymnasiumEnvironment("CartPole-v1", seed=seed)
        return np.stack([s.observation for s in run_episode(env, action=1)])

    assert np.array_equal(observations(3), observations(3))
    assert not np.array_equal(observations(3), observations(4))


@pytest.mark.parametrize("env_id", ["CartPole-v1", "MountainCar-v0"])
def test_validate_py_environment(env_id):
    env_utils.validate_py_environment(GymnasiumEnvironment(env_id, seed=0), episodes=3)


def test_validate_batched_environment():
    env = GymnasiumVectorEnvironment("CartPole-v1", num_envs=4, seed=0)
    assert env.batched and env.batch_size == 4
    env_utils.validate_py_environment(env, episodes=3)


def test_batched_matches_single_envs_step_for_step():
    """Each column of the vector env follows the same TF-Agents semantics as a single env."""
    num_envs, seed = 3, 7
    vector = GymnasiumVectorEnvironment("CartPole-v1", num_envs=num_envs, seed=seed, max_episode_steps=12)
    singles = [GymnasiumEnvironment("CartPole-v1", seed=seed + i, max_episode_steps=12) for i in range(num_envs)]
    rng = np.random.default_rng(0)
    batch = vector.reset()
    columns = [env.reset() for env in singles]
    restarts = 0
    for _ in range(60):
        for i, single_step in enumerate(columns):
            assert batch.step_type[i] == single_step.step_type
            assert batch.discount[i] == single_step.discount
            assert batch.reward[i] == single_step.reward
            np.testing.assert_array_equal(batch.observation[i], single_step.observation)
        actions = rng.integers(0, 2, size=num_envs).astype(np.int64)
        batch = vector.step(actions)
        columns = [env.step(actions[i]) for i, env in enumerate(singles)]
        restarts += int((batch.step_type == ts.StepType.FIRST).sum())
    assert restarts >= num_envs * 3  # episodes of <= 12 steps: every env restarted several times


def test_specs():
    observation, action, threshold, _ = env_specs("CartPole-v1")
    assert observation.shape == (4,) and observation.dtype == np.float32
    assert action.dtype == np.int64 and (action.minimum, action.maximum) == (0, 1)
    assert threshold == 475.0


def test_unknown_env_id():
    with pytest.raises(EnvError, match="unknown gymnasium env id 'NoSuchEnv-v0'"):
        env_specs("NoSuchEnv-v0")


def test_an_env_module_that_cannot_be_imported_is_named():
    with pytest.raises(EnvError, match=r"env id 'nosuchmodule:Foo-v0': importing its module failed .*nosuchmodule"):
        env_specs("nosuchmodule:Foo-v0")


def test_continuous_action_space_is_refused():
    with pytest.raises(EnvError, match="DQN needs Discrete, MultiDiscrete"):
        env_specs("Pendulum-v1")


def test_the_final_info_of_each_first_episode_is_kept_where_asked():
    import tests.user_envs  # noqa: F401 - registers SometimesSucceeds-v0 (is_success in every step's info)

    actor_env = GymnasiumVectorEnvironment("tests.user_envs:SometimesSucceeds-v0", 4, seed=8)
    actor_env.reset()
    actor_env.step(np.zeros(4, np.int64))
    assert actor_env.final_infos is None  # not kept unless asked: the actor's envs
    assert actor_env.infos == [{"is_success": False}] * 4  # each sub-env's info of the last step
    env = GymnasiumVectorEnvironment("tests.user_envs:SometimesSucceeds-v0", 4)
    env.keep_final_infos()
    for _ in range(2):  # a reset starts the record afresh
        env.reseed(8)
        env.reset()
        assert env.final_infos == [None] * 4
        for _ in range(4):  # seeds 8-11: episodes of 5, 3, 4, 5 steps
            env.step(np.zeros(4, np.int64))
        assert env.final_infos == [None, {"is_success": False}, {"is_success": False}, None]
        env.step(np.zeros(4, np.int64))  # sub-env 0 (seed 8) ends: the only success
        assert env.infos[0] == env.final_infos[0] == {"is_success": True}
        env.step(np.zeros(4, np.int64))
        assert env.infos[0] == {}  # its next step is the reset's, whose info has no key
        for _ in range(12):  # the envs play on into later episodes, whose ends do not replace the first's
            env.step(np.zeros(4, np.int64))
        assert env.final_infos == [{"is_success": True}, {"is_success": False}, {"is_success": False},
                                   {"is_success": False}]
