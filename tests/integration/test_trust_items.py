"""Control items forged from a second Reverb client against real roles: reset requests the learner refuses, weights
that actors and the evaluator refuse, and with a shared key, anything unsigned or signed with another key."""

import time

import numpy as np
import pytest
import reverb

from dqn.remote.reset_requests import ResetRequestSender
from dqn.remote.weights_puller import fetch_weights
from dqn.remote.weights_wire import publish_weights
from tests.conftest import FAST_FLAGS, wait_until
from tests.events import read_scalars

pytestmark = pytest.mark.integration

APPLIED = "Q-network re-initialized"
KEY = "a-test-key-of-32-characters-0123"


def refused_requests(system) -> int:
    return system.progress("learner").get("refused_reset_requests", 0)


def refused_weights(system, actor: str = "actor-0") -> int:
    return system.progress(actor).get("refused_weights", 0)


def test_reset_requests_that_cannot_be_genuine_are_refused_counted_and_block_nothing(system_factory):
    system = system_factory()
    learner = system.start_learner()
    system.start_actor(0)
    system.wait_training(300)
    forger = ResetRequestSender(system.server.address, 10.0)  # a second client, no key: what anyone can send
    forger.send(10**12)  # a step no evaluation of this learner's weights can have
    wait_until(lambda: refused_requests(system) >= 1, 60, "the learner to count the refused request")
    assert APPLIED not in learner.log()
    assert "charts/refused_reset_requests" in read_scalars(system.root / "learner")
    assert "refused a reset request: train step 1000000000000" in learner.log()
    # The refused request was not recorded as the last applied one: a genuine request (the evaluator asks on behalf
    # of an evaluation of weights the learner published, so at or below its step) is still applied.
    ResetRequestSender(system.server.address, 10.0).send(200)
    wait_until(lambda: APPLIED in learner.log(), 60, "the learner to apply the genuine request")
    assert refused_requests(system) == 1


def test_with_a_shared_key_unsigned_and_badly_signed_items_are_refused_and_counted(system_factory):
    system = system_factory()
    keyed = {"DQN_SHARED_KEY": KEY}
    learner = system.start_learner(env=keyed)
    system.start_actor(0, env=keyed)
    system.wait_training(300)
    wait_until(lambda: system.progress("actor-0").get("weights_train_step", -1) > 0, 60,
               "the actor to take the learner's signed weights")
    address = system.server.address
    ResetRequestSender(address, 10.0).send(100)  # unsigned, at a step that could be genuine
    wait_until(lambda: refused_requests(system) >= 1, 60, "the unsigned request to be refused")
    ResetRequestSender(address, 10.0, key="another-key-of-32-characters-xyz").send(150)
    wait_until(lambda: refused_requests(system) >= 2, 60, "the request signed with another key to be refused")
    assert APPLIED not in learner.log()
    ResetRequestSender(address, 10.0, key=KEY).send(200)  # what the evaluator of this run sends
    wait_until(lambda: APPLIED in learner.log(), 60, "the signed request to be applied")
    assert "unsigned (the shared key is set here" in learner.log()
    assert KEY not in learner.log() and KEY not in (system.root / "learner" / "config.json").read_text()

    # Weights: with the learner stopped (its final weights published), a forged item stays in the table until the
    # actor has looked at it.
    assert learner.terminate() == 0
    final = system.train_step()
    wait_until(lambda: system.progress("actor-0").get("weights_train_step") == final, 60, "the final weights")
    genuine = fetch_weights(address, 30.0)
    client = reverb.Client(address)
    publish_weights(client, [np.zeros_like(v) for v in genuine.variables], final + 10)  # unsigned
    wait_until(lambda: refused_weights(system) >= 1, 60, "the actor to refuse the unsigned weights")
    publish_weights(client, [np.zeros_like(v) for v in genuine.variables], final + 20, signature=b"x" * 32)
    wait_until(lambda: refused_weights(system) >= 2, 60, "the actor to refuse the badly signed weights")
    time.sleep(2)  # several more summaries
    assert system.progress("actor-0")["weights_train_step"] == final
    assert "actor/refused_weights" in read_scalars(system.root / "actor-0")


def test_weights_no_learner_could_have_published_are_refused_by_actors(system_factory):
    system = system_factory()
    learner = system.start_learner()
    system.start_actor(0)
    system.wait_training(200)
    assert learner.terminate() == 0
    final = system.train_step()
    wait_until(lambda: system.progress("actor-0").get("weights_train_step") == final, 60, "the final weights")
    genuine = fetch_weights(system.server.address, 30.0)
    publish_weights(reverb.Client(system.server.address), genuine.variables, 10**12)
    wait_until(lambda: refused_weights(system) >= 1, 60, "the actor to refuse the implausible weights")
    time.sleep(2)
    assert system.progress("actor-0")["weights_train_step"] == final


def controller_weights(variables: list[np.ndarray]) -> list[np.ndarray]:
    """Q-network weights that balance CartPole: push right when 0.1 x + 0.5 x' + theta/0.419 + theta' > 0.

    The first layer computes that sum and its negative in two units; Q(right) is the first unit, Q(left) the second.
    The network scales theta by its bound (0.419) before the first layer (observation_scaling narrow).
    """
    (kernel_1, bias_1, kernel_2, bias_2) = variables
    weights = [np.zeros_like(kernel_1), np.zeros_like(bias_1), np.zeros_like(kernel_2), np.zeros_like(bias_2)]
    rule = np.array([0.1, 0.5, 1.0, 1.0], np.float32)
    weights[0][:, 0], weights[0][:, 1] = rule, -rule
    weights[2][0, 1], weights[2][1, 0] = 1.0, 1.0
    return weights


def test_implausible_weights_never_become_the_evaluators_best_policy(replay_server_factory, tmp_path):
    from dqn.resolve import adopt_from_server
    from dqn.settings.config import EvaluatorConfig
    from evaluator.evaluate import Evaluator

    server = replay_server_factory(*FAST_FLAGS)
    config = adopt_from_server(EvaluatorConfig(
        root_dir=str(tmp_path / "run"), replay_address=server.address, fc_layer_params=(32,), envs_per_item=4,
        replay_min_size=200, eval_interval=50, eval_episodes=5, eval_confirm_episodes=0))
    evaluator = Evaluator.from_config(config, lambda: False)
    learner = reverb.Client(server.address)  # stands in for the learner: a genuine stream of train steps
    initial = evaluator.best._policy_weights.read()  # the untrained network's weights
    good = controller_weights(initial)

    def next_evaluation(timeout_s: float = 30.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            weights = evaluator.new_weights()
            if weights is not None:
                evaluation = evaluator.evaluate(weights)
                evaluator.offer_best(evaluation)
                evaluator.record(evaluation)
                return evaluation
            time.sleep(0.1)
        return None

    try:
        publish_weights(learner, initial, 100)
        assert next_evaluation().train_step == 100
        # The forger: weights that balance the pole, at a train step no learner reaches in seconds.
        publish_weights(reverb.Client(server.address), good, 10**9)
        assert next_evaluation(5.0) is None
        assert evaluator._puller.refused.count == 1
        assert evaluator.best.train_step in (None, 100)
        # The same weights at a step the learner could have reached are evaluated and kept: they do score well,
        # and only their train step kept them out above.
        publish_weights(learner, good, 200)
        evaluation = next_evaluation()
        assert evaluation.train_step == 200 and evaluation.average_return >= 475
        assert evaluator.best.train_step == 200
        assert "eval/refused_weights" in read_scalars(tmp_path / "run" / "evaluator")
    finally:
        evaluator.close()
