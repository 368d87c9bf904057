"""`dqn-service status`: what the running system is doing, from the replay server and health endpoints."""

from __future__ import annotations

import glob
import os
import time

import reverb

from dqn.process.health import check
from dqn.process.progress import read_progress
from dqn.remote.replay_client import server_info
from dqn.remote.role_reports import fetch_verdict
from dqn.remote.run_settings import fetch_run_settings
from dqn.remote.weights_puller import fetch_weights
from dqn.replay_layout.items import REPLAY_TABLE, VARIABLES_TABLE
from dqn.settings.common import AUTO_FROM_ENV
from launcher.verdict_line import read_verdict


def _counts(info) -> tuple[int, int]:
    limiter = info.rate_limiter_info
    return limiter.insert_stats.completed, limiter.sample_stats.completed


def _read_twice(addresses: list[str], timeout_s: float, interval_s: float) -> dict[str, tuple | Exception]:
    """Per address: (table infos, the same `interval_s` later), or the error that made the server unreachable."""
    clients = {address: reverb.Client(address) for address in addresses}
    reads: dict[str, tuple | Exception] = {}
    for rounds in range(2):
        if rounds:
            time.sleep(interval_s)
        for address, client in clients.items():
            if isinstance(reads.get(address), Exception):
                continue
            try:
                reads[address] = (*reads.get(address, ()), server_info(client, timeout_s))
            except Exception as error:  # noqa: BLE001 - any failure here means "not reachable" to the operator
                reads[address] = error
    return reads


def print_status(replay_address: str, health: dict[str, str], timeout_s: float, interval_s: float = 1.0,
                 root_dir: str | None = None, control_address: str | None = None) -> int:
    """Prints tables, counts and rates, latest train step, role health and (with `root_dir`) each role's progress.

    `control_address` is the server of the control tables, when not the replay server. Exit 1 if a server is
    unreachable.
    """
    if root_dir is not None:
        print_run_progress(root_dir)
    control_address = control_address or replay_address
    servers = {replay_address: ("replay server", [REPLAY_TABLE])}
    servers.setdefault(control_address, ("control server", []))[1].append(VARIABLES_TABLE)
    reads = _read_twice(list(servers), timeout_s, interval_s)
    for address, (label, _) in servers.items():
        error = reads[address]
        print(f"{label} {address}: " + (f"UNREACHABLE ({type(error).__name__})" if isinstance(error, Exception)
                                        else "reachable"))
    if any(isinstance(read, Exception) for read in reads.values()):
        for name, address in sorted(health.items()):
            print(f"{name:<16} {address:<24} {check(address, timeout_s)}")
        return 1
    print(f"{'table':<10} {'size':>10} {'max':>10} {'inserts':>10} {'samples':>10} {'ins/s':>9} {'smp/s':>9}")
    for address, (_, tables) in servers.items():
        first, second = reads[address]
        for name in tables:
            inserts0, samples0 = _counts(first[name])
            inserts1, samples1 = _counts(second[name])
            info = second[name]
            print(f"{name:<10} {info.current_size:>10} {info.max_size:>10} {inserts1:>10} {samples1:>10} "
                  f"{(inserts1 - inserts0) / interval_s:>9.1f} {(samples1 - samples0) / interval_s:>9.1f}")
    published = reads[control_address][1][VARIABLES_TABLE].current_size
    weights = fetch_weights(control_address, timeout_s) if published else None
    signed = "" if weights is None else (" (signed with a shared key)" if weights.signature else " (unsigned)")
    print(f"latest published train step: {weights.train_step if weights is not None else 'none yet'}{signed}")
    print_run_settings(reverb.Client(control_address), timeout_s)
    print_verdict(reverb.Client(control_address), timeout_s)
    for name, address in sorted(health.items()):
        print(f"{name:<16} {address:<24} {check(address, timeout_s)}{_checkpoint_note(address, timeout_s)}")
    return 0


def print_run_settings(client: reverb.Client, timeout_s: float) -> None:
    """The run's settings decided from its env (dqn/resolve.py), as the replay server publishes them."""
    settings = _control_item("run settings", fetch_run_settings, client, timeout_s, "not published yet")
    if settings is not None:
        decided = ", ".join(f"{name} {settings.get(name)}" for name in AUTO_FROM_ENV)
        print(f"run settings: env {settings.get('env_id')}, seed {settings.get('seed')}; decided from the env: "
              f"{decided}")


def print_verdict(client: reverb.Client, timeout_s: float) -> None:
    """The replay server's bottleneck verdict: the part that limits the run, its evidence and capacity figures."""
    verdict = _control_item("bottleneck", fetch_verdict, client, timeout_s,
                            "no verdict yet (the replay server judges once roles have reported for a few seconds)")
    if verdict is not None:
        show_verdict(verdict)


def _control_item(label: str, fetch, client: reverb.Client, timeout_s: float, missing: str) -> dict | None:
    """`fetch(client, timeout_s)`, or None after printing `label` with why there is nothing to show."""
    try:
        value = fetch(client, timeout_s)
    except Exception as error:  # noqa: BLE001 - the rest of the status is still worth printing
        print(f"{label}: not readable ({type(error).__name__})")
        return None
    if value is None:
        print(f"{label}: {missing}")
    return value


def show_verdict(verdict: dict) -> None:
    """A verdict item's line, evidence and capacity figures (from the server's table or its file)."""
    age = time.time() - float(verdict.get("time", 0.0))
    print(f"bottleneck (last {verdict.get('window_s', 0):.0f} s, {age:.0f} s ago): {verdict.get('line')}")
    for line in verdict.get("evidence", []):
        print(f"  {line}")
    capacity = capacity_line(verdict.get("figures", {}))
    if capacity:
        print(f"  capacity: {capacity}")


def capacity_line(figures: dict) -> str:
    """How many actors each part serves at the measured rates, from the verdict's figures."""
    parts = []
    if "actors_before_learner_binds" in figures:
        parts.append(f"≈{figures['actors_before_learner_binds']:.1f} actors before the learner binds "
                     f"({figures['per_actor_unheld_per_s']:,.0f} transitions/s each, the learner takes "
                     f"{figures['learner_wants_per_s']:,.0f}/s)")
    if "actors_per_server_core" in figures:
        parts.append(f"≈{figures['actors_per_server_core']:.0f} per replay-server core")
    if "mb_per_weight_pull" in figures:
        parts.append(f"weight pulls {figures.get('weight_pulls_per_s', 0):.0f}/s of "
                     f"{figures['mb_per_weight_pull']:.2f} MB")
    return "; ".join(parts)


def _checkpoint_note(address: str, timeout_s: float) -> str:
    """' (checkpoint writes failing ...)' when the role reports its 'checkpoints' health part NOT_SERVING."""
    if check(address, timeout_s, service="checkpoints") == "NOT_SERVING":
        return " (checkpoint writes failing: still serving from memory; see the role's log for the path and error)"
    return ""


#: What each role's progress file says, in the order shown: (key, label).
_PROGRESS_FIELDS = (("train_step", "train step"), ("env_steps", "env steps"), ("env_restarts", "env restarts"),
                    ("episodes", "episodes"), ("illegal_actions", "illegal actions"),
                    ("checkpoint_failures", "checkpoint failures"),
                    ("refused_reset_requests", "refused reset requests"), ("refused_weights", "refused weights"),
                    ("bad_batches_skipped", "bad replay batches skipped"), ("status", "status"))


def print_run_progress(root_dir: str) -> None:
    """One line per role directory under `root_dir` with a progress file (written by the roles, read here)."""
    directories = sorted(os.path.dirname(path) for path in glob.glob(os.path.join(root_dir, "*", "progress.json")))
    if not directories:
        print(f"run directory {root_dir}: no role progress yet")
    for directory in directories:
        progress = read_progress(directory)
        parts = [f"{label} {progress[key]}" for key, label in _PROGRESS_FIELDS if key in progress]
        print(f"{os.path.basename(directory):<16} " + (", ".join(parts) or "-"))
    verdict = read_verdict(root_dir)
    if verdict is not None:  # the replay server's copy: `local`'s server is out of reach of this process
        show_verdict(verdict)
