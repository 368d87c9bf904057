"""Process plumbing shared by the roles: logging, clean-stop signals, port checks."""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time

from dqn.errors import BadInput


def quiet_tensorflow() -> None:
    """Keeps TF's C++ INFO/WARNING chatter out of role logs (must run before importing TF)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def use_one_core() -> None:
    """One TensorFlow thread and one BLAS thread: actors and the evaluator share few cores with the learner.

    numpy's matmuls (the numpy policies) too: a second BLAS thread spins waiting for a core the others keep busy,
    and every small matmul then waits for it, far longer than the matmul itself takes.
    """
    import tensorflow as tf  # here, not at the top: quiet_tensorflow() must run before TF is imported
    from threadpoolctl import threadpool_limits

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    threadpool_limits(1, user_api="blas")


def setup_logging(role: str) -> logging.Logger:
    """One line per event, role and PID in every line so interleaved logs stay readable."""
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),  # not DQN_*: that prefix is reserved for config fields
        format=f"%(asctime)s {role}[%(process)d] %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )
    # A line that cannot be written (a full disk under the log) is dropped. Left on, logging would print the
    # failure's traceback to the same stream, and it lands there as soon as any other write frees a block.
    logging.raiseExceptions = False
    return logging.getLogger(role)


class StopSignal:
    """Turns SIGTERM/SIGINT into an event the main loop checks (so it can checkpoint and exit 0)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name: str | None = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self.signal_name = signal.Signals(signum).name
        self.event.set()

    @property
    def requested(self) -> bool:
        """True once a stop signal arrived."""
        return self.event.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Sleeps up to `timeout_s`, waking early on a stop signal; True if stopping."""
        return self.event.wait(timeout_s)


def exit_if_teardown_hangs(code: int, after_s: float) -> threading.Thread:
    """Ends the process with `code` unless it has exited `after_s` seconds from now (a daemon watchdog).

    Call it once a role's work is saved: destroying Reverb's server and clients, gRPC channels and TensorFlow
    objects has hung past a stop (rarely, after everything was written), and a stop must not wait on that.
    """
    def watchdog():
        time.sleep(after_s)
        logging.getLogger(__name__).warning("teardown still running %.0f s after the work was saved; exiting %d",
                                            after_s, code)
        logging.shutdown()
        os._exit(code)

    thread = threading.Thread(target=watchdog, name="exit-watchdog", daemon=True)
    thread.start()
    return thread


class PortInUse(BadInput):
    """Something already listens on the port we were told to serve on."""


def ensure_port_free(port: int) -> None:
    """Raises PortInUse if the port is taken on any interface.

    gRPC sets SO_REUSEPORT, so a second Reverb server on a busy port would start silently and
    clients would split between the two; a bind without SO_REUSEPORT detects the owner.
    """
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # e.g. no IPv6 in this network namespace
        # SO_REUSEADDR: a just-stopped server's TIME_WAIT connections must not block a restart; on Linux a
        # live listener still makes this bind fail (it lacks SO_REUSEPORT, which gRPC's listener has).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise PortInUse(f"port {port} is already in use (another replay server?); stop it or choose "
                                f"another port with --port / DQN_PORT") from None
            if error.errno != errno.EADDRNOTAVAIL:
                raise
        finally:
            probe.close()


@functools.cache
def _malloc_trim():
    """The C library's malloc_trim from the process's own symbols, or None (not glibc); looked up once."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_heap() -> bool:
    """Hands freed heap pages back to the OS (glibc's malloc_trim); False where that is not available.

    A one-off burst of allocations (a replay checkpoint builds all its records in memory, many times the file's
    size) otherwise stays in the process's RSS after it is freed.
    """
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def free_space(path: str) -> str:
    """Free space of the filesystem holding `path` ('1.2 MiB'), or 'unknown'."""
    try:
        free = float(shutil.disk_usage(path).free)
    except OSError:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if free < 1024 or unit == "GiB":
            return f"{free:.0f} B" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return "unknown"
