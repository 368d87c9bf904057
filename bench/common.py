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
    from dqn.process.health import check

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


def inserted(client) -> int:
    """Items the replay table has accepted since the server started (not capped by its max size)."""
    from dqn.replay_layout.items import REPLAY_TABLE

    return client.server_info(timeout=30)[REPLAY_TABLE].rate_limiter_info.insert_stats.completed


def fill_replay(address: str, num_transitions: int, num_envs: int = 16, env_id: str = "CartPole-v1", options=None,
                seed: int = 0, envs_per_item: int | None = None) -> float:
    """Writes about `num_transitions` random-policy transitions through the actor's writer; returns them per s.

    `envs_per_item` must match the server's (default: the default config's, as a server without the flag).
    """
    import numpy as np
    import reverb

    from dqn.envs.vector_env import GymnasiumVectorEnvironment
    from dqn.replay_layout.env_block_writer import BlockStreams
    from dqn.replay_layout.env_stream_writer import TrajectoryStreams
    from dqn.replay_layout.items import ItemShape
    from dqn.settings.config import CommonConfig

    envs = ItemShape.from_config(CommonConfig()).envs_per_item if envs_per_item is None else envs_per_item
    env = GymnasiumVectorEnvironment(env_id, num_envs, seed=seed, options=options)
    client = reverb.Client(address)
    spec = env.observation_spec()  # its parts are columns of their own (a Dict with a mask of valid actions)
    streams = BlockStreams(client, num_envs, envs, observation_spec=spec) if envs > 1 else \
        TrajectoryStreams(client, num_envs, observation_spec=spec)
    rng = np.random.default_rng(seed)
    num_actions = int(env.action_spec().maximum) + 1
    time_step, start = env.reset(), time.perf_counter()
    while streams.items_created * envs < num_transitions:
        action = rng.integers(0, num_actions, size=num_envs, dtype=np.int64)
        next_time_step = env.step(action)
        streams.append(time_step, action, next_time_step)
        streams.wait_for_server(max_pending_per_stream=4, timeout_ms=30_000)  # < Reverb's ~60-pending warning
        time_step = next_time_step
    streams.close(timeout_ms=120_000)
    env.close()
    return streams.items_created * envs / (time.perf_counter() - start)


def make_dataset(config):
    """The learner's batches as a plain dataset: sampled items finished into the rows `agent.train` takes.

    The learner itself applies `finish_batch` inside its feed's staging call (learner/staged_batches.py).
    """
    from dqn.resolve import resolved_builder

    builder = resolved_builder(config)
    return builder.make_dataset().map(builder.layout.finish_batch())


def save_env_png(figure, directory: str, env_id: str, suffix: str = "") -> str:
    """Writes a matplotlib figure as `<directory>/<env name><suffix>.png`, closes it, returns the path.

    The env name is the id without its `module:` prefix, "/" written as "-".
    """
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, env_id.rpartition(":")[2].replace("/", "-") + suffix + ".png")
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def cpu_name() -> str:
    """This machine's CPU model and core count (`model name` of /proc/cpuinfo), so rows say what measured them."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            models = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
    except OSError:
        models = []
    return f"{models[0] if models else 'unknown CPU'}, {os.cpu_count()} cores"


def boot_id() -> str | None:
    """The kernel's id of this boot, or None where the kernel has none.

    Rows of one box and boot share it, so runs of a pair spread over days can show they ran on one machine (a reboot
    or another VM changes it).
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def machine() -> dict:
    """What measured a row: core count, CPU model, load average now, the kernel's boot id."""
    return {"nproc": os.cpu_count(), "cpu": cpu_name(), "loadavg": os.getloadavg(), "boot_id": boot_id()}


def git_commit() -> str:
    """The checked-out commit, `+dirty` when tracked files differ from it."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True,
                           text=True).stdout.strip()
    return head + ("+dirty" if dirty else "")
