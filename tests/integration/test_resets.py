"""The fallback reset across processes: a request in the replay server resets the learner once, empties the
replay table, and the actors' epsilon schedule restarts from it."""

import time

import pytest
import reverb

from dqn.remote.reset_requests import ResetRequestSender
from dqn.remote.weights_puller import fetch_weights
from dqn.replay_layout.items import REPLAY_TABLE
from tests.conftest import wait_until
from tests.events import read_scalars

pytestmark = pytest.mark.integration

# Long enough that the actor, summarizing every 0.25 s, sees epsilon above 0.5 after the reset (~900 train steps).
DECAY = ("--epsilon-decay-steps", "1600", "--epsilon-end", "0.1")
APPLIED = "Q-network re-initialized"


def published_exploration_start(address: str) -> int:
    weights = fetch_weights(address, 30.0)
    assert weights is not None, "no weights published"
    return weights.exploration_start


def replay_inserts(client: reverb.Client) -> int:
    """Items inserted into the replay table since it was created or last emptied (a reset zeroes the count)."""
    return client.server_info(timeout=10)[REPLAY_TABLE].rate_limiter_info.insert_stats.completed


def test_a_reset_request_is_applied_once_and_restarts_the_actors_epsilon(system_factory):
    system = system_factory()
    learner = system.start_learner(*DECAY)
    system.start_actor(0, *DECAY, "--summary-interval-s", "0.25")
    system.wait_training(1700)
    assert published_exploration_start(system.server.address) == 0
    assert APPLIED not in learner.log()

    def actor_epsilons():
        return read_scalars(system.root / "actor-0").get("actor/epsilon", [])

    # Summaries are periodic: wait for one at the schedule's end (0.1) before the request,
    # so that the climb back after it is the reset's doing.
    wait_until(lambda: any(abs(value - 0.1) < 1e-6 for _, value in actor_epsilons()), 60,
               "the actor's epsilon to reach its end before the reset")
    decayed_at = max(step for step, value in actor_epsilons() if abs(value - 0.1) < 1e-6)

    # What the evaluator sends when a run fell back (evaluator/reset_rule.py), through the real replay server.
    client = reverb.Client(system.server.address)
    inserted_before = replay_inserts(client)
    ResetRequestSender(system.server.address, 10.0, client=client).send(480)
    # Emptying the table zeroes its insert count; the actors take seconds to insert as many items again.
    wait_until(lambda: replay_inserts(client) < inserted_before, 60, "the replay table to be emptied")
    wait_until(lambda: APPLIED in learner.log(), 60, "the learner to apply the reset request")
    assert "replay emptied" in learner.log()
    wait_until(lambda: published_exploration_start(system.server.address) > 0, 30, "the new epsilon start published")
    start = published_exploration_start(system.server.address)
    assert start >= 1700, "the schedule restarts at the train step the learner applied the request, not before"

    # The actor's epsilon was at its end (0.1) before the request and climbs back to near 1 after it.
    wait_until(lambda: any(value > 0.5 for step, value in actor_epsilons() if step > decayed_at), 60,
               "the actor's epsilon to restart from the new exploration start")

    # A restarted learner restores the applied request and the schedule's start: no second reset.
    system.wait_training(start + 200)
    assert learner.terminate() == 0
    restarted = system.start_learner(*DECAY)
    wait_until(lambda: "learner starting at train step" in restarted.log(), 90, "the learner to restart")
    resumed_at = system.train_step()
    system.wait_training(resumed_at + 100)
    time.sleep(3)  # several polls of the requests table, which still holds the old request
    assert APPLIED not in restarted.log()
    assert published_exploration_start(system.server.address) == start
