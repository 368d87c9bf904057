"""An actor whose writes the rate limiter holds (no learner samples) still stops within 2 s of SIGTERM."""

import os
import signal
import time

import pytest
import reverb

from dqn.process.progress import read_progress
from dqn.remote.replay_client import REPLAY_TABLE, server_info
from tests.conftest import FAST_FLAGS, wait_until

pytestmark = pytest.mark.integration


def table(address: str):
    return server_info(reverb.Client(address), 5.0)[REPLAY_TABLE]


def test_actor_stops_within_two_seconds_of_sigterm_and_keeps_what_was_stored(spawn, replay_server_factory, tmp_path):
    server = replay_server_factory(*FAST_FLAGS)
    root = tmp_path / "run"
    # Warm-up longer than the test: the actor collects without weights until the rate limiter blocks its inserts
    # (nobody samples), which is where an actor stands when the learner has stopped first.
    actor = spawn("actor", "--root-dir", str(root), "--replay-address", server.address, *FAST_FLAGS,
                  "--actor-id", "0", "--num-envs", "4", "--warmup-steps", "10000000", "--summary-interval-s", "1",
                  name="actor")
    wait_until(lambda: table(server.address).num_episodes > 0, 120, "the actor's first inserts")

    def blocked() -> bool:  # inserts have stopped growing while the actor keeps creating items
        before = table(server.address).rate_limiter_info.insert_stats.completed
        time.sleep(1.5)
        return table(server.address).rate_limiter_info.insert_stats.completed == before

    wait_until(blocked, 120, "the rate limiter to hold the actor's inserts", interval_s=0)
    stored = table(server.address)

    started = time.monotonic()
    os.kill(actor.pid, signal.SIGTERM)
    code = actor.wait(30)
    elapsed = time.monotonic() - started
    assert code == 0, actor.log()[-2000:]
    print(f"actor exit {elapsed:.2f} s after SIGTERM")
    assert elapsed < 2.0, f"the actor took {elapsed:.1f} s to stop"
    after = table(server.address)
    assert after.current_size >= stored.current_size  # what the server confirmed stays in the table
    assert after.rate_limiter_info.insert_stats.completed >= stored.rate_limiter_info.insert_stats.completed
    assert read_progress(str(root / "actor-0"))["status"] == "stopped"
