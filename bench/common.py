"""Helpers shared by the benchmarks: a real replay-server subprocess on a free port, filling it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

import portpicker

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@contextlib.contextmanager
def replay_server(*flags: str):
    """Yields the address of a `dqn-service replay-server` subprocess; SIGTERM on exit."""
    port, health = portpicker.pick_unused_port(), portpicker.pick_unused_port()
    root = tempfile.mkdtemp(prefix="bench-replay-")
    log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115
    process = subprocess.Popen([sys.executable, "-m", "launcher", "replay-server", "--root-dir", root,
                                "--port", str(port), "--health-port", str(health), "--checkpoint-interval-s", "0",
                                "--samples-per-insert", "0", *flags], stdout=log, stderr=subprocess.STDOUT)
    from dqn.health import check

    deadline = time.monotonic() + 120
    while check(f"localhost:{health}", 1.0) != "SERVING":
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"replay server did not start; see {root}/server.log")
        time.sleep(0.2)
    try:
        yield f"localhost:{port}", process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
        log.close()


def fill_replay(address: str, num_items: int, num_envs: int = 8) -> None:
    """Writes about `num_items` random-policy CartPole items through the actor's writer."""
    import numpy as np
    import reverb

    from actor.writer import TrajectoryStreams
    from dqn.envs import GymnasiumVectorEnvironment

    env = GymnasiumVectorEnvironment("CartPole-v1", num_envs, seed=0)
    streams = TrajectoryStreams(reverb.Client(address), num_envs)
    rng = np.random.default_rng(0)
    time_step = env.reset()
    while streams.items_created < num_items:
        action = rng.integers(0, 2, size=num_envs, dtype=np.int64)
        next_time_step = env.step(action)
        streams.append(time_step, action, next_time_step)
        streams.wait_for_server(max_pending_per_stream=4, timeout_ms=10_000)  # < Reverb's ~60-pending warning
        time_step = next_time_step
    streams.close(timeout_ms=60_000)
