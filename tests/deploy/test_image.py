"""Static checks of deploy/Dockerfile and .dockerignore (no Docker engine needed)."""

from __future__ import annotations

import json
import re
import tomllib

from tests.deploy.manifests import DOCKERFILE, REPO


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", joined, re.M)]


def stages() -> list[list[tuple[str, str]]]:
    """Instructions grouped by build stage (each starts with FROM)."""
    groups: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            groups.append([])
        if groups:
            groups[-1].append(instruction)
    return groups


def glob_regex(pattern: str) -> str:
    """A .dockerignore pattern as a regex (Go filepath.Match plus `**` for any number of directories)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return out


def dockerignored(path: str) -> bool:
    """Whether .dockerignore excludes `path`: a pattern matching it or a parent dir; the last match wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        regex = glob_regex(pattern.lstrip("!").strip("/"))
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def test_base_image_is_python_311_slim():
    """Every stage builds on python:3.11-slim (through the PYTHON_IMAGE build arg)."""
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.M))
    froms = [arguments.split()[0] for name, arguments in instructions() if name == "FROM"]
    assert froms and all(f in ("${PYTHON_IMAGE}", "python:3.11-slim") for f in froms)
    assert args["PYTHON_IMAGE"] == "python:3.11-slim"


def test_installs_the_project_from_the_lock():
    """The build installs `.` constrained by requirements.lock, copying every package pyproject declares."""
    build = stages()[0]
    runs = " ".join(arguments for name, arguments in build if name == "RUN")
    assert "pip install -c requirements.lock ." in runs
    copied = {source for name, arguments in build if name == "COPY" for source in arguments.split()[:-1]}
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = {package.split(".")[0] for package in packages}  # subpackages come with their top-level folder
    assert folders | {"pyproject.toml", "README.md", "requirements.lock"} <= copied
    for source in copied:
        assert (REPO / source).exists(), f"COPY {source}: no such file"
        assert not dockerignored(source), f"COPY {source} is excluded by .dockerignore"


def test_dockerignore_keeps_the_context_small():
    """Local venvs, run dirs, VCS data and caches never enter the build context."""
    for path in (".git/config", ".venv/bin/python", "runs/cartpole/config.json", "tests/conftest.py",
                 "dqn/__pycache__/config.cpython-311.pyc", "dqn_service.egg-info/PKG-INFO", "bench/x.py"):
        assert dockerignored(path), path
    assert not dockerignored("dqn/settings/config.py") and not dockerignored("launcher/cli.py")


def test_runtime_runs_dqn_service_as_non_root():
    """The final stage: a numeric non-root USER, `dqn-service` entrypoint (the role is the command)."""
    final = stages()[-1]
    users = [arguments for name, arguments in final if name == "USER"]
    assert users, "the runtime stage must set USER"
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.M))
    uid = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], users[-1]).split(":")[0]
    assert uid.isdigit() and int(uid) != 0, users[-1]
    entrypoint = [json.loads(arguments) for name, arguments in final if name == "ENTRYPOINT"]
    assert entrypoint == [["dqn-service"]]
    assert not any(name == "VOLUME" for name, _ in final), "anonymous volumes would hide the named ones"
    assert any(name == "COPY" and "--from=build" in arguments for name, arguments in final)
    assert not any(name == "RUN" and "pip install" in arguments for name, arguments in final), \
        "the runtime stage gets the venv from the build stage"
