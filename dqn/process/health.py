"""grpc.health.v1 for every long-running role, plus a client probe (compose healthchecks, k8s probes).

A role is SERVING while it says so (`set(True)`) and its main loop beats (`beat()`) within the stall deadline: a
process that is alive but whose loop is stuck (a call without a deadline, a deadlock) turns NOT_SERVING, so a
liveness probe restarts it instead of keeping a live process that does no work.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

log = logging.getLogger("health")


class HealthServer:
    """A tiny gRPC server answering health checks for one role ('' = overall, and the role's name).

    With `stall_timeout_s` > 0 a watchdog thread turns the role NOT_SERVING while its main loop has not called
    `beat()` for that long, and SERVING again when it does.
    """

    def __init__(self, port: int, role: str, host: str = "", stall_timeout_s: float = 0.0):
        self.role = role
        self._servicer = health.HealthServicer()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                                   options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, self._server)
        bind = f"[{host}]" if ":" in host else (host or "[::]")
        self.port = self._server.add_insecure_port(f"{bind}:{port}")
        if self.port == 0:
            raise OSError(f"cannot listen on health port {port} of {host or 'every interface'}: it is in use")
        self._lock = threading.Lock()
        self._serving = False
        self._stalled = False
        self._last_beat = time.monotonic()
        self._stall_timeout_s = stall_timeout_s
        self._closed = threading.Event()
        self._publish()
        self._server.start()
        if stall_timeout_s > 0:
            threading.Thread(target=self._watch, name="health-watchdog", daemon=True).start()

    def set(self, serving: bool) -> None:
        """Marks the role (and the overall service) SERVING or NOT_SERVING; SERVING starts the stall deadline anew."""
        with self._lock:
            self._serving = serving
            self._last_beat = time.monotonic()
            self._stalled = False
            self._publish()

    def beat(self) -> None:
        """Called by the role's main loop on every pass: the loop is alive."""
        self._last_beat = time.monotonic()
        if self._stalled:
            with self._lock:
                if self._stalled:
                    self._stalled = False
                    log.warning("%s: main loop running again; SERVING", self.role)
                    self._publish()

    def _publish(self) -> None:
        status = SERVING if self._serving and not self._stalled else NOT_SERVING
        self._servicer.set("", status)
        self._servicer.set(self.role, status)

    def _watch(self) -> None:
        interval = min(1.0, self._stall_timeout_s / 4)
        while not self._closed.wait(interval):
            idle = time.monotonic() - self._last_beat
            with self._lock:
                if self._serving and not self._stalled and idle > self._stall_timeout_s:
                    self._stalled = True
                    log.error("%s: main loop stalled (no pass for %.0f s, deadline %.0f s); NOT_SERVING until it "
                              "runs again", self.role, idle, self._stall_timeout_s)
                    self._publish()

    def set_service(self, name: str, serving: bool) -> None:
        """Marks one part of the role (e.g. 'checkpoints') SERVING or NOT_SERVING; the role's status is unchanged."""
        self._servicer.set(name, SERVING if serving else NOT_SERVING)

    def stop(self) -> None:
        """Stops answering (in-flight checks get a short grace)."""
        self._closed.set()
        self._server.stop(grace=0.5)


def check(address: str, timeout_s: float = 3.0, service: str = "") -> str:
    """Status name ('SERVING', 'NOT_SERVING', ...) of a health endpoint, or 'UNREACHABLE'."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError:
            return "UNREACHABLE"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


class NullHealth:
    """Stand-in when a role runs without a health port."""

    port = 0

    def set(self, serving: bool) -> None:
        """No-op."""

    def set_service(self, name: str, serving: bool) -> None:
        """No-op."""

    def beat(self) -> None:
        """No-op."""

    def stop(self) -> None:
        """No-op."""


def start_health(config, role: str) -> HealthServer | NullHealth:
    """The health server a role's settings ask for (`HealthConfig`), or a no-op when its port is 0."""
    if not config.health_port:
        return NullHealth()
    return HealthServer(config.health_port, role, config.health_host, config.health_stall_timeout_s)
