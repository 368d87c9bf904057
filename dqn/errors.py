"""Errors that end a process with a clear one-line message instead of a traceback."""

from __future__ import annotations


class ServiceError(Exception):
    """A condition the operator must fix or wait out; exits 1 with the message."""

    exit_code = 1


class BadInput(ServiceError):
    """Bad configuration or input (config value, env, port, spec/checkpoint mismatch); exits 2."""

    exit_code = 2
