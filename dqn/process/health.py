"""grpc.health.v1 for every long-running role, plus a client probe (compose healthchecks, k8s probes)."""

from __future__ import annotations

from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthServer:
    """A tiny gRPC server answering health checks for one role ('' = overall, and the role's name)."""

    def __init__(self, port: int, role: str):
        self.role = role
        self._servicer = health.HealthServicer()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                                   options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, self._server)
        self.port = self._server.add_insecure_port(f"[::]:{port}")
        if self.port == 0:
            raise OSError(f"cannot listen on health port {port}: it is in use")
        self.set(False)
        self._server.start()

    def set(self, serving: bool) -> None:
        """Marks the role (and the overall service) SERVING or NOT_SERVING."""
        status = SERVING if serving else NOT_SERVING
        self._servicer.set("", status)
        self._servicer.set(self.role, status)

    def set_service(self, name: str, serving: bool) -> None:
        """Marks one part of the role (e.g. 'checkpoints') SERVING or NOT_SERVING; the role's status is unchanged."""
        self._servicer.set(name, SERVING if serving else NOT_SERVING)

    def stop(self) -> None:
        """Stops answering (in-flight checks get a short grace)."""
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

    def stop(self) -> None:
        """No-op."""


def start_health(port: int, role: str) -> HealthServer | NullHealth:
    """A health server on `port`, or a no-op when port is 0."""
    return HealthServer(port, role) if port else NullHealth()
