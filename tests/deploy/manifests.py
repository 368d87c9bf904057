"""Helpers for the offline deployment checks: parsed compose file, rendered kustomize overlays."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
GPU_OVERRIDE = REPO / "deploy" / "compose.gpu.yml"
SWARM_OVERRIDE = REPO / "deploy" / "swarm.yml"
SIGNED_OVERRIDE = REPO / "deploy" / "compose.signed.yml"
DOCKERFILE = REPO / "deploy" / "Dockerfile"
K8S = REPO / "deploy" / "k8s"
OVERLAYS = {"base": K8S / "base", "dev": K8S / "overlays" / "dev", "gpu": K8S / "overlays" / "gpu"}
ROLES = ("replay-server", "learner", "actor", "evaluator")
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def tool(name: str) -> str:
    """Path of a CLI tool from the venv (next to this Python) or PATH; skips the test when it is missing."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (pip install -c requirements.lock -e '.[test]' / kubectl on PATH)")
    return found


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """The compose file as PyYAML sees it (anchors and `<<` merges resolved)."""
    return yaml.safe_load(path.read_text())


def project_name() -> str:
    """The Compose project name from the repository's .env (docker-compose.yml carries no `name`)."""
    lines = (REPO / ".env").read_text().splitlines()
    return next(line.split("=", 1)[1] for line in lines if line.startswith("COMPOSE_PROJECT_NAME="))


def render(overlay: str) -> list[dict[str, Any]]:
    """`kubectl kustomize` of an overlay, as a list of objects."""
    result = subprocess.run([tool("kubectl"), "kustomize", str(OVERLAYS[overlay])], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"kubectl kustomize {overlay} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def rendered_text(overlay: str) -> str:
    """The rendered overlay as one multi-document YAML string."""
    return yaml.safe_dump_all(render(overlay), sort_keys=False)


def pod_templates(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload object, pod template) for every workload in the rendered objects."""
    for obj in objects:
        if obj["kind"] in WORKLOAD_KINDS:
            spec = obj["spec"]
            if obj["kind"] == "CronJob":
                spec = spec["jobTemplate"]["spec"]
            yield obj, spec["template"]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The single object of this kind and name (name prefix/suffix from kustomize allowed)."""
    found = [o for o in objects if o["kind"] == kind and re.fullmatch(rf"(.*-)?{re.escape(name)}(-[a-z0-9]+)?",
                                                                        o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def component(obj: dict[str, Any]) -> str:
    """The app.kubernetes.io/component label of an object or pod template."""
    return obj["metadata"].get("labels", {}).get("app.kubernetes.io/component", "")


def role_of(container: dict[str, Any]) -> str:
    """The dqn-service role a container runs (its first argument), or its command for other programs."""
    command = container.get("command") or []
    if command and command[0] != "dqn-service":
        return command[0]
    args = container.get("args") or []
    return args[0] if args else ""


def config_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    """DQN_* settings of the generated ConfigMap."""
    return dict(one(objects, "ConfigMap", "dqn-config")["data"])


def container_env(objects: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    """The DQN_* environment a container gets: its ConfigMap refs, then its own `env` values."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        name = source["configMapRef"]["name"]
        env.update(next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name)["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def parse_duration_s(text: str | int) -> float:
    """Compose duration ('1m30s', '90s', '2m') in seconds."""
    if isinstance(text, int | float):
        return float(text)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"bad duration {text!r}"
    return sum(float(n) * units[u] for n, u in parts)
