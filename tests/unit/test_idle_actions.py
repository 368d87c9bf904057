"""action_gap_alpha auto: random play finds actions that change nothing and earn nothing, and only those envs get it."""

import pytest

from dqn.envs.idle_actions import IDLE_ALPHA, alpha_for, idle_shares
from dqn.envs.making import EnvOptions
from dqn.resolve import resolve_settings
from dqn.settings.config import LearnerConfig
from tests.helpers import auto_setting

IDLE_ROOM = "tests.user_envs:IdleRoom-v0"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_room_whose_useless_actions_change_nothing_gets_advantage_learning(seed):
    assert auto_setting(IDLE_ROOM, "action_gap_alpha", seed=seed) == IDLE_ALPHA
    shares = idle_shares(IDLE_ROOM, EnvOptions(), call_limit_s=10.0, seed=seed)
    assert [action for action, share in shares.items() if share == 1.0] == [2, 3, 4]
    assert shares[0] < 0.5 and shares[1] < 0.5  # a wall stops a move now and then, far below the threshold


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "FrozenLake-v1", "Taxi-v4",
                                    "CliffWalking-v1", "tests.user_envs:IdleRoomWithStepCost-v0",
                                    "tests.user_envs:BoolGrid-v0", "tests.user_envs:DictObs-v0"])
def test_envs_without_free_idle_actions_keep_plain_targets(env_id):
    # Taxi's useless pick-ups cost 10 and the step-cost room's idling costs 0.01: the gap is wide already.
    shares = idle_shares(env_id, EnvOptions(), call_limit_s=10.0, seed=0)  # raises where the env cannot be played
    assert shares and alpha_for(shares) == 0.0


def test_an_explicit_alpha_is_kept_and_auto_is_decided():
    assert resolve_settings(LearnerConfig(env_id=IDLE_ROOM, action_gap_alpha=0.0)).action_gap_alpha == 0.0
    assert resolve_settings(LearnerConfig(env_id=IDLE_ROOM)).action_gap_alpha == IDLE_ALPHA
    assert resolve_settings(LearnerConfig(env_id="CartPole-v1")).action_gap_alpha == 0.0


def test_an_env_that_fails_in_random_play_keeps_plain_targets(caplog):
    assert auto_setting("tests.user_envs:AlwaysHangingCartPole-v0", "action_gap_alpha", env_call_timeout_s=0.2) == 0.0
    assert "random play failed (EnvCallTimeout" in caplog.text


def test_the_rule_on_measured_shares():
    assert alpha_for({0: 0.1, 1: 0.95}) == IDLE_ALPHA
    assert alpha_for({0: 0.1, 1: 0.77}) == 0.0  # MinAtar's Asterix: things move on most idle-looking steps
    assert alpha_for({}) == 0.0  # no action tried often enough (a slow env)
