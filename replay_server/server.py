"""The replay server process: Reverb tables with a real checkpointer, periodic and final checkpoints.

Unlike the stock `reverb_server` it restores from `checkpoint_dir` on start, checkpoints every
`checkpoint_interval_s`, checkpoints then exits 0 on SIGTERM *and* SIGINT, refuses a busy port,
reports a restored table whose config differs from the running config, and serves grpc.health.v1.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import reverb
import tensorflow as tf

from dqn.builder import DqnBuilder
from dqn.errors import BadInput, ServiceError
from dqn.model.networks import layout_changes
from dqn.process.cgroup import memory_limit
from dqn.process.health import start_health
from dqn.process.progress import write_progress
from dqn.process.runtime import StopSignal, ensure_port_free, exit_if_teardown_hangs, free_space, release_free_heap
from dqn.process.summaries import GraphScalars
from dqn.remote.replay_client import server_info, wait_for_server
from dqn.remote.run_settings import fetch_run_settings, publish_run_settings
from dqn.replay_layout.items import REPLAY_TABLE, REPORT_TABLES, VARIABLES_TABLE
from dqn.resolve import resolve_run, run_env_specs
from dqn.settings import loading as config_loading
from dqn.settings.config import ReplayServerConfig, role_dir
from replay_server.checkpoint_dir import check_checkpoint_dir
from replay_server.learner_speed import ask_the_learner
from replay_server.memory_check import check_replay_memory
from replay_server.recovery import (
    complete_checkpoints,
    remove_partial_checkpoints,
    set_aside_checkpoint_dir,
    unreadable_files,
)
from replay_server.tables import table_mismatches
from replay_server.verdict_watch import VerdictWatch

log = logging.getLogger("replay-server")
#: Seconds the process may spend destroying Reverb and gRPC objects after its final checkpoint before it exits anyway.
TEARDOWN_GRACE_S = 10.0


class RestoreMismatch(BadInput):
    """The checkpoint's tables differ from the configured ones."""


class CorruptCheckpoint(ServiceError):
    """Reverb could not load the latest checkpoint."""


def restored_layout_changes(client: reverb.Client, config: ReplayServerConfig) -> list[str]:
    """The layout settings in which this start differs from the run settings its checkpoint restored, if readable."""
    try:
        recorded = fetch_run_settings(client, config.rpc_timeout_s)
    except Exception:  # noqa: BLE001 - only a fuller message is lost: the mismatch is refused all the same
        return []
    return layout_changes(recorded or {}, config_loading.to_dict(config))


def start_reverb(config: ReplayServerConfig, builder: DqnBuilder) -> tuple[reverb.Server, list[reverb.Table]]:
    """Starts Reverb on the configured port (checked free by the caller), restoring the latest complete checkpoint.

    A checkpoint Reverb cannot load is named (file and reason); with on_corrupt_checkpoint=quarantine it
    is moved aside and the server starts from the previous complete checkpoint, or empty.
    """
    checkpoint_dir = config.resolved_checkpoint_dir()
    check_checkpoint_dir(checkpoint_dir)
    os.makedirs(checkpoint_dir, exist_ok=True)
    while True:
        tables = builder.make_tables()
        checkpointer = reverb.checkpointers.DefaultCheckpointer(path=checkpoint_dir)
        try:
            return reverb.Server(tables=tables, port=config.port, checkpointer=checkpointer), tables
        except RuntimeError as error:
            complete = complete_checkpoints(checkpoint_dir)
            if not complete:
                raise
            latest = complete[-1]
            bad = unreadable_files(latest) or [latest]
            if config.on_corrupt_checkpoint != "quarantine":
                raise CorruptCheckpoint(
                    f"replay checkpoint {latest} cannot be loaded ({error}); unreadable: {', '.join(bad)}. "
                    "Recovery: restart with --on-corrupt-checkpoint quarantine (DQN_ON_CORRUPT_CHECKPOINT) to move "
                    "it aside and start from the previous complete checkpoint or empty, or restore it from a "
                    "backup.") from None
            try:
                moved = set_aside_checkpoint_dir(latest, config.resolved_quarantine_dir())
            except OSError as move_error:
                raise CorruptCheckpoint(
                    f"replay checkpoint {latest} cannot be loaded ({error}) and cannot be set aside into "
                    f"{config.resolved_quarantine_dir()} ({move_error}). Free space there, or delete {latest} "
                    "to start from the previous complete checkpoint or empty.") from None
            log.error("replay checkpoint %s cannot be loaded (%s; unreadable: %s); quarantined it to %s and "
                      "starting from the previous complete checkpoint, or empty", latest, error, ", ".join(bad), moved)


class CheckpointScheduler:
    """Periodic checkpoints and stats lines on a background thread; `checkpoint("final")` on stop.

    A checkpoint write that fails (disk full, write error) never stops the server: it keeps serving its in-memory
    buffer, removes the partial checkpoint, logs the path and free space, reports it (health service
    `checkpoints` NOT_SERVING, the `replay/checkpoint_failures` scalar, the progress file) and tries again at the
    next interval. The previous complete checkpoint stays the one a restart loads.
    """

    def __init__(self, client: reverb.Client, config: ReplayServerConfig, stop: StopSignal, health=None):
        self._client = client
        self._config = config
        self._stop = stop
        self._health = health
        self._lock = threading.Lock()  # one checkpoint at a time (periodic vs. final)
        self.last_checkpoint: str | None = None
        self._written_at_last: tuple[int, ...] | None = None  # insert counts when the last checkpoint began
        self.failures = 0
        self._attempts = 0
        self.last_error: str | None = None
        self._summary_dir = config.path(role_dir("replay-server"))
        self._writer = _summary_writer(self._summary_dir)
        self._scalars = GraphScalars(self._writer)
        self._thread = threading.Thread(target=self._run, name="replay-checkpoints", daemon=True)

    def start(self) -> None:
        """Starts the background thread."""
        self._thread.start()

    def _insert_counts(self) -> tuple[int, ...] | None:
        """Completed inserts per table, or None if the server does not answer.

        The verdict's tables take an item every few seconds and hold nothing a restart needs: left out, or every
        final checkpoint would be written again.
        """
        try:
            info = server_info(self._client, self._config.rpc_timeout_s)
        except Exception:  # noqa: BLE001 - only an optimisation depends on it
            return None
        return tuple(info[name].rate_limiter_info.insert_stats.completed for name in sorted(info)
                     if name not in REPORT_TABLES)

    def checkpoint(self, reason: str) -> str | None:
        """Writes a checkpoint now (Reverb blocks traffic while it writes); None if the write failed.

        A final checkpoint is not written again when nothing was inserted since the last one began (writers stop
        first, so a periodic checkpoint that was under way at the stop already holds everything): a table of GBs
        takes most of a minute to write. With prioritized replay it always is (priority updates are not counted).
        """
        with self._lock:
            counts = self._insert_counts()
            if (reason == "final" and counts is not None and counts == self._written_at_last
                    and not self._config.prioritized_replay):
                log.info("checkpoint (final): nothing inserted since %s began; it is the final one",
                         self.last_checkpoint)
                return self.last_checkpoint
            started = time.monotonic()
            self._attempts += 1
            try:
                path = self._client.checkpoint()
            except Exception as error:  # noqa: BLE001 - Reverb raises IndexError/RuntimeError for I/O errors
                self._failed(reason, error)
                return None
            self.last_checkpoint, self._written_at_last = path, counts
            if self.last_error is not None:
                log.info("replay checkpoints work again after %d failure(s)", self.failures)
            self.last_error = None
            log.info("checkpoint (%s) written to %s in %.2f s", reason, path, time.monotonic() - started)
            self._report()
            release_free_heap()  # the checkpoint's records were freed; without this each one raised RSS for good
            return path

    def _failed(self, reason: str, error: Exception) -> None:
        checkpoint_dir = self._config.resolved_checkpoint_dir()
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {str(error).strip()}"
        removed = remove_partial_checkpoints(checkpoint_dir)
        log.error("replay checkpoint (%s) failed: %s; %s free in %s; removed the partial checkpoint %s. Serving the "
                  "in-memory buffer; a restart would load %s. Retrying %s", reason, self.last_error,
                  free_space(checkpoint_dir), checkpoint_dir, ", ".join(removed) or "(none)",
                  self.last_checkpoint or "the previous complete checkpoint (if any)",
                  "never (stopping)" if reason == "final" else
                  f"in {self._config.checkpoint_interval_s:.0f} s" if self._config.checkpoint_interval_s else "on stop")
        self._report()

    def _report(self) -> None:
        """Checkpoint health to the health service, the summary scalar and the progress file (best effort)."""
        if self._health is not None:
            self._health.set_service("checkpoints", self.last_error is None)
        try:
            self._scalars.write(self._attempts, {"replay/checkpoint_failures": self.failures})
            self._writer.flush()
        except (tf.errors.OpError, OSError):
            pass  # the same full disk; the count is in the log and the health service
        try:
            write_progress(self._summary_dir, checkpoint_failures=self.failures, last_checkpoint=self.last_checkpoint,
                           checkpoint_error=self.last_error)
        except OSError:
            pass

    def _run(self) -> None:
        interval = self._config.checkpoint_interval_s
        next_checkpoint = time.monotonic() + interval if interval > 0 else float("inf")
        next_stats = time.monotonic()
        while not self._stop.wait(min(1.0, max(0.0, min(next_checkpoint, next_stats) - time.monotonic()))):
            now = time.monotonic()
            try:
                # Reverb answering is the server's heartbeat: it serves from C++ threads, which this one asks.
                info = server_info(self._client, self._config.rpc_timeout_s)
                if self._health is not None:
                    self._health.beat()
                if now >= next_stats:
                    next_stats = now + self._config.stats_interval_s
                    log.info("%s", format_stats(info))
            except Exception as error:  # noqa: BLE001 - a failed periodic action must not kill the server
                if now >= next_stats:
                    next_stats = now + self._config.stats_interval_s
                    log.error("table statistics failed (%s: %s); will retry", type(error).__name__, error)
            if now >= next_checkpoint:
                next_checkpoint = now + interval
                self.checkpoint("periodic")  # never raises: a failed write is reported and retried


def format_stats(info: dict) -> str:
    """One log line: size and insert/sample counts of both tables."""
    parts = []
    for name in (REPLAY_TABLE, VARIABLES_TABLE):
        table = info[name]
        limiter = table.rate_limiter_info
        parts.append(f"{name}: size={table.current_size}/{table.max_size} "
                     f"inserts={limiter.insert_stats.completed} samples={limiter.sample_stats.completed}")
    return "; ".join(parts)


def serve(config: ReplayServerConfig) -> int:
    """Runs the replay server until SIGTERM/SIGINT; returns the process exit code."""
    stop = StopSignal()
    ensure_port_free(config.port)
    # The run's settings are decided here when roles start apart (and by `local` before it starts this server).
    config = resolve_run(config, config.path(role_dir("replay-server"), "config.json"), ask_the_learner(config))
    specs = run_env_specs(config)
    memory_warning = check_replay_memory(config, specs.observation, memory_limit())
    if memory_warning:
        log.warning("%s", memory_warning)
    builder = DqnBuilder(config, specs)
    server, tables = start_reverb(config, builder)
    # A pending-settings server may just have left this port: the first call may meet its closed socket.
    client = wait_for_server(f"localhost:{server.port}", wait_s=config.connect_timeout_s,
                             call_timeout_s=config.rpc_timeout_s)
    info = server_info(client, config.rpc_timeout_s)
    mismatches = table_mismatches(tables, info)
    if mismatches:
        changed = restored_layout_changes(client, config)
        server.stop()
        raise RestoreMismatch(
            "the restored replay checkpoint does not match the config: " + "; ".join(mismatches) +
            (f". Settings that shape the network or the env differ from the run that wrote it: {', '.join(changed)}"
             if changed else "") +
            f". Start with the checkpoint's settings, or move {config.resolved_checkpoint_dir()} aside "
            "to start with an empty buffer.")
    envs_per_item = builder.layout.envs_per_item
    log.info("replay server on port %d (checkpoints in %s; replay items of %d env(s) each); restored %s",
             server.port, config.resolved_checkpoint_dir(), envs_per_item, format_stats(info))
    publish_run_settings(client, config_loading.to_dict(config), config.rpc_timeout_s)
    health = start_health(config, "replay-server")
    health.set(True)
    scheduler = CheckpointScheduler(client, config, stop, health)
    scheduler.start()
    VerdictWatch(client, config, envs_per_item, _summary_writer(config.path(role_dir("replay-server"))),
                 stop.event).start()
    stop.event.wait()
    log.info("%s received: final checkpoint, then stop", stop.signal_name)
    health.set(False)
    final = scheduler.checkpoint("final")  # never raises: a failed write is logged and returns None
    code = 0
    if final is None:
        log.error("stopped without a final checkpoint: items written since %s are lost on restart",
                  scheduler.last_checkpoint or "the previous complete checkpoint")
        code = 1
    # Reverb's stop closes its tables and then shuts gRPC down, and nothing here bounds the closing. The work is
    # saved, so the watchdog is armed before the stop, not after it.
    exit_if_teardown_hangs(code, TEARDOWN_GRACE_S)
    health.stop()
    server.stop()
    return code


def _summary_writer(directory: str):
    """The server's TensorBoard writer (a no-op writer if the directory cannot be written)."""
    try:
        return tf.summary.create_file_writer(directory)
    except (tf.errors.OpError, OSError):
        return tf.summary.create_noop_writer()
