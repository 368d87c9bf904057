"""The fallback reset: when the evaluator asks for one, and what the learner's re-initialization does."""

import numpy as np

from dqn.agent import build_agent, reinitialize_q_networks
from dqn.config import CommonConfig
from dqn.resets import FallbackResetRule
from dqn.weights.wire import PublishedWeights


def feed(rule: FallbackResetRule, returns: list[float], solved_from: int | None = None, every: int = 100) -> list[int]:
    """Evaluations every `every` train steps; the train steps at which the rule asked for a reset."""
    fired = []
    for i, average_return in enumerate(returns, start=1):
        step = i * every
        if rule.observe(step, average_return, solved=solved_from is not None and step >= solved_from):
            fired.append(step)
    return fired


def test_a_run_that_came_near_its_target_and_fell_back_is_reset_after_patience():
    # CartPole's shape: random play ~10, a peak of 460 at step 1,500 (target 475), then ~100 from step 1,600.
    returns = [10, 40, 90, 150, 200, 260, 300, 330, 360, 380, 400, 420, 440, 450, 460] + [100] * 20
    rule = FallbackResetRule(patience=500, target=475.0)
    assert feed(rule, returns) == [2100]  # low from 1,600, 500 train steps later; the fresh attempt never came near
    assert rule.fallback_level() == 10 + 0.5 * (460 - 10)
    assert rule.resets == 1


def test_a_fresh_attempt_is_reset_again_only_after_it_came_near_itself():
    near_again = [10, 400, 460] + [50] * 6 + [300] + [50] * 8
    assert feed(FallbackResetRule(500, 475.0), near_again) == [900, 1600]
    never_near_again = [10, 400, 460] + [50] * 6 + [200] + [50] * 8
    assert feed(FallbackResetRule(500, 475.0), never_near_again) == [900]


def test_a_slow_start_is_not_a_fall():
    # Acrobot's shape: -500 for a long time, one lucky -420: far from halfway to the target (-100).
    rule = FallbackResetRule(patience=500, target=-100.0)
    assert feed(rule, [-500, -500, -420] + [-500] * 40) == []
    assert rule.near_level() == -300.0 and not rule.armed


def test_an_evaluation_back_above_the_level_restarts_the_patience():
    rule = FallbackResetRule(patience=500, target=475.0)
    low, high = [100] * 4, [300]
    assert feed(rule, [10, 400, 460] + (low + high) * 8) == []


def test_no_reset_once_solved_without_a_target_or_with_patience_zero():
    returns = [10, 300, 470] + [50] * 30
    assert feed(FallbackResetRule(500, 475.0), returns, solved_from=300) == []
    assert feed(FallbackResetRule(500, None), returns) == []
    assert feed(FallbackResetRule(0, 475.0), returns) == []
    assert feed(FallbackResetRule(500, 475.0), returns) == [900]


def test_reinitialize_gives_fresh_weights_to_the_q_network_and_its_target():
    bundle = build_agent(CommonConfig(env_id="CartPole-v1"))
    online, target = bundle.agent._q_network.variables, bundle.agent._target_q_network.variables
    for variable in online + target:
        variable.assign(np.full(variable.shape, 7.0, np.float32))
    reinitialize_q_networks(bundle, CommonConfig(env_id="CartPole-v1"))
    kernels = [v.numpy() for v in online if "kernel" in v.name]
    assert kernels and all(np.std(k) > 0 and not np.any(k == 7.0) for k in kernels)
    for a, b in zip(online, target, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # the policy the actors read is the online network
    assert not any(np.any(v.numpy() == 7.0) for v in bundle.policy_variables if "kernel" in v.name)


def test_the_epsilon_schedule_counts_from_the_last_reset():
    assert PublishedWeights([], 5_000).exploration_step == 5_000
    assert PublishedWeights([], 5_000, exploration_start=4_200).exploration_step == 800
