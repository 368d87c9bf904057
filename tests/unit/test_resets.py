"""The fallback reset: when the evaluator asks for one, and what the learner's re-initialization does."""

import time

import numpy as np

from dqn.model.agent import reinitialize_q_networks
from dqn.remote.connection import RemoteConnection
from dqn.remote.weights_wire import PublishedWeights
from dqn.resolve import resolved_builder
from dqn.settings.config import CommonConfig, LearnerConfig
from evaluator.reset_rule import FallbackResetRule
from tests.conftest import free_port


def feed(rule: FallbackResetRule, returns: list[float], solved_from: int | None = None, every: int = 100) -> list[int]:
    """Evaluations every `every` train steps; the train steps at which the rule asked for a reset."""
    fired = []
    for i, average_return in enumerate(returns, start=1):
        step = i * every
        if rule.observe(step, average_return, solved=solved_from is not None and step >= solved_from):
            fired.append(step)
    return fired


def test_a_run_stuck_partway_after_its_peak_is_reset_after_patience():
    # CartPole's plateau: random play ~10, a peak of 460 at step 1,500 (target 475), then ~100 from step 1,600.
    returns = [10, 40, 90, 150, 200, 260, 300, 330, 360, 380, 400, 420, 440, 450, 460] + [100] * 20
    rule = FallbackResetRule(patience=500, target=475.0)
    assert feed(rule, returns) == [2100]  # in the band from 1,600, 500 train steps later
    assert rule.fired_band == (10 + 0.1 * 465, 10 + 0.5 * 450)


def test_a_fresh_attempt_is_judged_on_its_own_best():
    # After the reset the attempt's best is ~100: 100s are not below halfway to it, so no second reset.
    returns = [10, 400, 460] + [100] * 6 + [20, 60, 100] + [100] * 10
    assert feed(FallbackResetRule(500, 475.0), returns) == [900]
    # A fresh attempt that peaks again and falls back again is reset again.
    assert feed(FallbackResetRule(500, 475.0), returns[:12] + [300] + [100] * 6) == [900, 1900]


def test_a_streak_needs_enough_evaluations_as_well_as_train_steps():
    rule = FallbackResetRule(patience=500, target=475.0)
    # Evaluations 400 train steps apart: patience is reached at the second, the fifth one decides.
    assert feed(rule, [10, 460] + [100] * 6, every=400) == [2800]


def test_evaluations_at_the_random_level_are_noise_not_a_plateau():
    # Acrobot's shape while it learns: near the target, then back at -500 (no swing-up) now and then.
    rule = FallbackResetRule(patience=500, target=-100.0)
    assert feed(rule, [-500, -500, -130] + [-500, -480, -450, -500, -200] * 8) == []
    # A slow start at the random level is not stuck either.
    assert feed(FallbackResetRule(500, -100.0), [-500] * 40 + [-420]) == []


def test_an_attempt_that_stalled_low_is_reset_after_four_patiences():
    # A CartPole run whose best was 166 (step 1,000) and which then played ~95: never below halfway to its best.
    returns = [9, 9, 27, 60, 157, 68, 90, 106, 136, 166] + [95] * 30
    rule = FallbackResetRule(patience=500, target=475.0)
    assert feed(rule, returns) == [3100]  # stalled from 1,100; 4 x 500 train steps later
    assert rule.fired_band == (9 + 0.1 * 466, 9 + 0.5 * 466)


def test_a_stall_lasts_at_least_as_long_as_the_attempt_took_to_reach_its_best():
    # A slow learner: its best (200) came 3,000 train steps after its first evaluation; 4 x 500 is not enough.
    climb = [10 + 6.4 * i for i in range(31)]
    rule = FallbackResetRule(patience=500, target=475.0)
    assert feed(rule, climb + [180] * 40) == [6200]  # stalled from 3,200; 3,000 train steps later


def test_a_rising_stall_is_progress_even_without_a_new_best():
    # LunarLander-v3 seed 1: a lucky early evaluation (-59) stays the best while the policy climbs from about -250.
    rule = FallbackResetRule(patience=500, target=200.0)
    early = [-196, -183, -59, -78, -235, -254]
    rising = [-150 + 2 * i for i in range(40)]  # -150 to -72, still below -59
    assert feed(rule, early + rising) == []
    assert feed(FallbackResetRule(500, 200.0), early + [-150] * 40) == [2700]  # flat: stalled from 700


def test_new_bests_keep_a_slow_learner_from_being_reset():
    slow = [10 + 3 * i + (20 if i % 3 == 0 else 0) for i in range(70)]  # noisy, new best every third evaluation
    assert feed(FallbackResetRule(500, 475.0), slow) == []


def test_an_evaluation_back_above_the_ceiling_restarts_the_patience():
    rule = FallbackResetRule(patience=500, target=475.0)
    low, high = [100] * 4, [300]
    assert feed(rule, [10, 400, 460] + (low + high) * 8) == []


def test_no_reset_once_solved_without_a_target_or_with_patience_zero():
    returns = [10, 300, 470] + [100] * 20
    assert feed(FallbackResetRule(500, 475.0), returns, solved_from=300) == []
    assert feed(FallbackResetRule(500, None), returns) == []
    assert feed(FallbackResetRule(0, 475.0), returns) == []
    assert feed(FallbackResetRule(500, 475.0), returns) == [900]


def test_reinitialize_gives_fresh_weights_to_the_q_network_and_its_target():
    bundle = resolved_builder(CommonConfig(env_id="CartPole-v1")).agent
    online, target = bundle.agent._q_network.variables, bundle.agent._target_q_network.variables
    for variable in online + target:
        variable.assign(np.full(variable.shape, 7.0, np.float32))
    reinitialize_q_networks(bundle)
    kernels = [v.numpy() for v in online if "kernel" in v.name]
    assert kernels and all(np.std(k) > 0 and not np.any(k == 7.0) for k in kernels)
    for a, b in zip(online, target, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # the policy the actors read is the online network
    assert not any(np.any(v.numpy() == 7.0) for v in bundle.policy_variables if "kernel" in v.name)


def test_the_epsilon_schedule_counts_from_the_last_reset():
    assert PublishedWeights([], 5_000).exploration_step == 5_000
    assert PublishedWeights([], 5_000, exploration_start=4_200).exploration_step == 800


def test_a_lucky_first_evaluation_does_not_raise_the_floor():
    # An untrained network's greedy policy scored 132, then random-level play, a peak and the plateau near 90.
    returns = [132, 8, 10, 65, 150, 482] + [90] * 10
    rule = FallbackResetRule(500, 475.0)
    assert feed(rule, returns) == [1200]
    assert rule.fired_band == (8 + 0.1 * 467, 8 + 0.5 * 467)  # halfway to the target is below halfway to 482


def test_a_replay_server_that_cannot_empty_its_table_leaves_the_reset_to_the_network(tmp_path):
    from dqn.resolve import resolve_settings
    from learner.train import Learner

    config = LearnerConfig(root_dir=str(tmp_path), replay_address=f"localhost:{free_port()}", fc_layer_params=(32,),
                           rpc_timeout_s=1.0)
    learner = Learner(resolve_settings(config))
    learner.replay = RemoteConnection(config.replay_address, config.rpc_timeout_s, "emptying")  # nothing listens
    started = time.monotonic()
    assert learner.empty_replay() is False
    assert time.monotonic() - started < 5, "the call runs under the rpc deadline"
