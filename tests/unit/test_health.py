"""The health service's stall deadline and bind address, on a real gRPC server."""

import time

from dqn.process.health import HealthServer, check
from tests.conftest import free_port, wait_until


def test_a_loop_that_stops_beating_turns_not_serving_and_serving_again_when_it_beats():
    server = HealthServer(free_port(), "actor", host="127.0.0.1", stall_timeout_s=0.5)
    address = f"127.0.0.1:{server.port}"
    try:
        assert check(address) == "NOT_SERVING"  # until the role says it serves
        server.set(True)
        for _ in range(8):  # beats within the deadline: SERVING throughout
            server.beat()
            assert check(address) == "SERVING" and check(address, service="actor") == "SERVING"
            time.sleep(0.2)
        wait_until(lambda: check(address) == "NOT_SERVING", 5, "NOT_SERVING once the beats stop")
        assert check(address, service="actor") == "NOT_SERVING"
        server.beat()
        assert check(address) == "SERVING"
        server.set(False)  # a role that stops says so, beats or not
        server.beat()
        assert check(address) == "NOT_SERVING"
    finally:
        server.stop()


def test_without_a_deadline_a_quiet_loop_stays_serving():
    server = HealthServer(free_port(), "replay-server", host="127.0.0.1")
    try:
        server.set(True)
        time.sleep(1.0)
        assert check(f"127.0.0.1:{server.port}") == "SERVING"
    finally:
        server.stop()


def test_a_health_host_binds_that_address_only():
    server = HealthServer(free_port(), "replay-server", host="127.0.0.1")
    try:
        server.set(True)
        assert check(f"127.0.0.1:{server.port}") == "SERVING"
        assert check(f"[::1]:{server.port}", timeout_s=1.0) == "UNREACHABLE"
    finally:
        server.stop()
