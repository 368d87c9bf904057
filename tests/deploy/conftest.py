"""Fixtures for the offline deployment checks (helpers live in tests/deploy/manifests.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.manifests import OVERLAYS, load_compose, render


@pytest.fixture(scope="session")
def compose() -> dict[str, Any]:
    """Parsed docker-compose.yml."""
    return load_compose()


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """Every overlay rendered once per session."""
    return {name: render(name) for name in OVERLAYS}
