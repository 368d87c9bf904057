"""Health follows the main loop, not just the process: a role whose loop is stuck turns NOT_SERVING."""

import time

import pytest

from tests.conftest import free_port, health_status, wait_until
from tests.helpers import FAST, NO_LIMITER

pytestmark = pytest.mark.integration

ENV = "tests.flaky_env:HangOnFileCartPole-v0"


def test_an_actor_whose_env_never_returns_turns_not_serving(replay_server_factory, spawn, tmp_path):
    """The actor's env hangs in a step (no env-call deadline, so nothing recovers it): the process lives and its
    health server answers, but its loop makes no pass; health says NOT_SERVING within the stall deadline."""
    server = replay_server_factory(*FAST, *NO_LIMITER, "--env-id", ENV)  # never throttled: it steps
    hang = tmp_path / "hang-now"
    health_port = free_port()
    actor = spawn("actor", "--root-dir", str(server.root), "--replay-address", server.address, *FAST,
                  "--env-id", ENV, "--num-envs", "4", "--warmup-steps", "1000000", "--env-call-timeout-s", "0",
                  "--health-port", str(health_port), "--health-stall-timeout-s", "3", env={"HANG_FILE": str(hang)},
                  name="actor")
    wait_until(lambda: not actor.alive() or health_status(health_port) == "SERVING", 120, "the actor SERVING")
    assert actor.alive(), actor.log()
    time.sleep(5)  # past the deadline: a loop that makes passes stays SERVING
    assert health_status(health_port) == "SERVING"
    hang.touch()
    wait_until(lambda: health_status(health_port) == "NOT_SERVING", 15, "NOT_SERVING after the loop stalled")
    assert actor.alive()
    assert "actor: main loop stalled (no pass for" in actor.log()
    actor.kill()  # its loop waits in the env for good: SIGTERM would wait out the whole grace period
