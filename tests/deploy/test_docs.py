"""README.md and docs/*.md say only things that hold: commands, links, flags, settings, paths, objects.

Each check is a function that returns the problems it finds in a text, tested on small fixture documents
below, then applied to the repository's documents.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from dqn.settings import loading as config_loading
from dqn.settings.config import ALL_CONFIG_CLASSES
from tests.deploy.manifests import REPO, one, pod_templates

README = REPO / "README.md"
CI_SCRIPT = REPO / ".ci" / "run"
MAX_README_LINES = 250
HISTORY = re.compile(r"\bsession [0-9]+|/tmp script|issue #[0-9]+|#[0-9]+'s", re.IGNORECASE)
KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet", "svc": "Service", "service": "Service",
         "hpa": "HorizontalPodAutoscaler"}


def doc_files() -> list[Path]:
    """The user's documentation: README.md and docs/*.md."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def commands(text: str) -> list[str]:
    """Shell commands of the ```bash / ```sh / ```console code blocks, continuation lines joined, comments kept."""
    found = []
    for block in re.findall(r"```(?:bash|sh|shell|console)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line and not line.startswith("#"):
                found.append(line)
    return found


def words(command: str) -> list[str]:
    """A command split as the shell would, comments dropped."""
    return shlex.split(command, comments=True)


def steps(command: str) -> list[list[str]]:
    """The `&&`-chained steps of a command, each split into words."""
    return [words(part) for part in command.split("&&") if words(part)]


def ci_steps(script: str) -> list[list[str]]:
    """What the CI script runs to install and test: the steps of its line that runs pytest."""
    line = next(line for line in script.splitlines() if "pytest" in line and not line.lstrip().startswith("#"))
    return steps(line)


def runs_local(step: list[str]) -> bool:
    """`dqn-service local ...` (by any path to the console script)."""
    return len(step) >= 2 and step[0].rsplit("/", 1)[-1] == "dqn-service" and step[1] == "local"


def first_commands_problems(readme: str, ci_script: str) -> list[str]:
    """The README's first two commands: exactly what CI runs (install + tests) and a run of `dqn-service local`."""
    first = commands(readme)[:2]
    if len(first) < 2:
        return ["the README must open with two commands: the CI install + test command and the run command"]
    problems = []
    if ci_steps(ci_script) not in [steps(c) for c in first]:
        problems.append(f"neither of the README's first two commands is what {CI_SCRIPT.relative_to(REPO)} runs: "
                        f"{' && '.join(shlex.join(s) for s in ci_steps(ci_script))}")
    if not any(runs_local(steps(c)[-1]) for c in first):
        problems.append("neither of the README's first two commands ends by running `dqn-service local`")
    return problems


def broken_links(path: Path, text: str) -> list[str]:
    """Relative Markdown links of `text` (a file at `path`) whose target file does not exist."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#", 1)[0]).exists():
            broken.append(f"{path.name}: {target}")
    return broken


def history_mentions(name: str, text: str) -> list[str]:
    """Development history (sessions, issue numbers, throwaway scripts) in a file's text."""
    return [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in HISTORY.finditer(text)]


def mentioned_flags(text: str) -> set[str]:
    """Flags of `dqn-service` commands (code blocks and inline code) and inline code that starts with a flag.

    Flags of other tools' commands (`docker compose up --scale ...`) are theirs and not collected.
    """
    found = set()
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    lines = [*commands(text), *spans]
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue
        ours = any(t.rsplit("/", 1)[-1] == "dqn-service" for t in tokens) or "launcher" in tokens
        for token in tokens if ours else tokens[:1]:
            if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", token):
                found.add(token.split("=", 1)[0])
    return found


def cli_flags() -> set[str]:
    """Every option string of every `dqn-service` subcommand."""
    import argparse

    from launcher.cli import _parser

    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {option for sub in [parser, *subparsers.choices.values()] for action in sub._actions
            for option in action.option_strings}


# --- the checks on fixture documents -------------------------------------------------------------------------------

CI_FIXTURE = """#!/usr/bin/env bash
set -euo pipefail
rm -rf .venv
python3.11 -m venv .venv && .venv/bin/pip install -c requirements.lock -e '.[test]' && .venv/bin/pytest
"""
GOOD_README = """# Title
```bash
python3.11 -m venv .venv && .venv/bin/pip install -c requirements.lock -e '.[test]' && .venv/bin/pytest
.venv/bin/dqn-service local   # trains CartPole
```
See [the reference](docs/configuration.md#settings) and [the web](https://example.org); set `--num-envs 8`.
```bash
docker compose up --scale actor=4
dqn-service actor --num-envs 16 --replay-address HOST:8000
```
"""


def test_the_checks_accept_a_good_readme_and_name_each_fault_of_bad_ones(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "configuration.md").write_text("x")
    readme = tmp_path / "README.md"
    assert first_commands_problems(GOOD_README, CI_FIXTURE) == []
    assert broken_links(readme, GOOD_README) == []
    assert history_mentions("README.md", GOOD_README) == []
    assert mentioned_flags(GOOD_README) == {"--num-envs", "--replay-address"}

    swapped = GOOD_README.replace("-e '.[test]' && .venv/bin/pytest", "-e . && .venv/bin/pytest")
    assert "what .ci/run runs" in first_commands_problems(swapped, CI_FIXTURE)[0]
    no_run = GOOD_README.replace(".venv/bin/dqn-service local", ".venv/bin/dqn-service status")
    assert first_commands_problems(no_run, CI_FIXTURE) == [
        "neither of the README's first two commands ends by running `dqn-service local`"]
    assert broken_links(readme, GOOD_README.replace("configuration.md", "config.md")) == [
        "README.md: docs/config.md#settings"]
    history = "In Session 13's runs (a /tmp script), #5's targets and issue #22 were met."
    assert len(history_mentions("x.md", history)) == 4
    assert "--typo" in mentioned_flags(GOOD_README + "Use `--typo 3`.\n")


# --- the checks on the repository ----------------------------------------------------------------------------------

def test_readme_opens_with_the_ci_command_and_the_run_command():
    problems = first_commands_problems(README.read_text(), CI_SCRIPT.read_text())
    assert not problems, problems


def test_readme_is_a_short_guide():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; keep it to {MAX_README_LINES}, details in docs/"


def test_relative_links_resolve():
    broken = [link for path in doc_files() for link in broken_links(path, path.read_text())]
    assert not broken, f"links to missing files: {broken}"


def test_no_development_history_in_tracked_files():
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, f"git ls-files failed (the check needs a git checkout): {listed.stderr}"
    hits = []
    for name in listed.stdout.splitlines():
        path = REPO / name
        if name.startswith("tests/") or not path.is_file():
            continue
        try:
            hits += history_mentions(name, path.read_text())
        except UnicodeDecodeError:
            continue  # binary files
    assert not hits, "development history belongs in git, not the repository:\n" + "\n".join(hits)


def bench_flags() -> set[str]:
    """Flags the bench/ scripts define (read from their source: importing them would start TensorFlow)."""
    return {flag for path in (REPO / "bench").glob("*.py")
            for flag in re.findall(r"add_argument\(\s*\"(--[a-z0-9-]+)\"", path.read_text())}


def test_flags_in_the_docs_exist():
    known = cli_flags() | bench_flags()
    unknown = {f"{path.name}: {flag}" for path in doc_files() for flag in mentioned_flags(path.read_text())
               if flag not in known}
    assert not unknown, f"flags that no dqn-service subcommand or bench/ script has: {sorted(unknown)}"


def test_configuration_reference_is_current():
    from launcher.config_reference import COMMAND, markdown

    path = REPO / "docs" / "configuration.md"
    assert path.is_file() and path.read_text() == markdown(), f"docs/configuration.md is out of date: run `{COMMAND}`"


def test_settings_in_the_docs_are_real():
    known = config_loading.known_field_names(ALL_CONFIG_CLASSES)
    unknown = {f"{path.name}: {name}" for path in doc_files()
               for name in re.findall(r"DQN_[A-Z0-9_]+", path.read_text())
               if name.removeprefix("DQN_").lower() not in known and not secret_file_variable(name)}
    assert not unknown, f"DQN_* names that are no setting: {sorted(unknown)}"


def secret_file_variable(name: str) -> bool:
    """DQN_<SECRET>_FILE: the file form of a secret setting (dqn/settings/loading.py)."""
    secrets = set().union(*(config_loading.secret_fields(cls) for cls in ALL_CONFIG_CLASSES))
    key = name.removeprefix("DQN_").lower()
    return key.endswith(config_loading.SECRET_FILE_SUFFIX) and key[:-len(config_loading.SECRET_FILE_SUFFIX)] in secrets


def test_repository_paths_in_the_docs_exist():
    # Only folders whose names are not also run-directory or TensorBoard-tag prefixes (learner/..., actor/...).
    pattern = r"(?<![\w/.-])((?:deploy|tests|bench|docs)/[\w./-]*\w|docker-compose\.yml)"
    missing = {f"{path.name}: {p}" for path in doc_files() for p in re.findall(pattern, path.read_text())
               if not (REPO / p).exists()}
    assert not missing, f"paths that do not exist: {sorted(missing)}"


def all_commands(prefix: str) -> list[list[str]]:
    """Commands of every document that start with `prefix`, split into words."""
    return [w for path in doc_files() for c in commands(path.read_text())
            if (w := words(c))[:len(prefix.split())] == prefix.split()]


def test_compose_commands_name_real_services_and_files(compose):
    """Services in `docker compose` commands and `-f` files exist; scale and exec targets are real."""
    services = set(compose["services"])
    found = all_commands("docker compose")
    assert found, "the docs show no `docker compose` command"
    for command in found:
        rest = command[2:]
        while rest[0] == "-f":  # compose's own options come before the subcommand
            assert (REPO / rest[1]).is_file(), command
            rest = rest[2:]
        subcommand, args = rest[0], rest[1:]
        for i, word in enumerate(args):
            if word == "--scale":
                assert args[i + 1].split("=")[0] in services, command
        targets = [a for a in args if not a.startswith("-")]
        if subcommand in ("logs", "exec", "cp", "run", "stop", "start", "restart") and targets:
            assert targets[0].split(":")[0] in services, f"{' '.join(command)}: no such service"


def test_kubectl_commands_name_real_objects(rendered):
    """Namespaces, overlays and objects in `kubectl` commands exist in the rendered manifests."""
    namespaces = {next(o for o in objs if o["kind"] == "Namespace")["metadata"]["name"]: name
                  for name, objs in rendered.items()}
    found = all_commands("kubectl")
    assert found, "the docs show no `kubectl` command"
    for command in found:
        if "-k" in command:
            target = command[command.index("-k") + 1]
            assert target.removeprefix("deploy/k8s/").replace("overlays/", "") in rendered, target
        if "-n" not in command:
            continue
        objects = rendered[namespaces[command[command.index("-n") + 1]]]
        for word in command:
            kind, _, name = word.partition("/")
            if kind in KINDS and name:
                one(objects, KINDS[kind], name)
            if word.startswith("app.kubernetes.io/component="):
                assert any(t["metadata"]["labels"].get("app.kubernetes.io/component") == word.split("=")[1]
                           for _, t in pod_templates(objects))

