"""Code style is part of the suite: ruff must pass on the whole tree."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    result = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_files_stay_small():
    too_long = {str(p.relative_to(REPO)): n for p in REPO.rglob("*.py")
                if ".venv" not in p.parts and (n := len(p.read_text().splitlines())) > 400}
    assert not too_long, f"files over 400 lines: {too_long}"


PACKAGES = ("dqn", "actor", "learner", "replay_server", "evaluator", "launcher")


def import_graph() -> dict[str, set[str]]:
    """First-party module -> first-party modules it imports anywhere in its source (functions included)."""
    import ast

    def name_of(path: Path) -> str:
        parts = path.relative_to(REPO).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    sources = {name_of(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}
    graph = {}
    for module, path in sources.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        graph[module] = {name for name in imported if name in sources and name != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles: the strongly connected components of more than one module."""
    order, low, stack, found = {}, {}, [], []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """Counting imports inside functions too: a lazy import that closes a cycle is still a tangle."""
    graph = import_graph()
    assert "launcher.roles" in graph["launcher.forked"] and "launcher.roles" in graph["launcher.cli"]
    assert not cycles(graph), f"import cycles: {cycles(graph)}"


def test_layers_settings_at_the_bottom_dqn_knows_no_role_and_roles_know_only_dqn():
    graph = import_graph()
    below_settings = {"dqn.errors", "dqn.files"}  # standard library only
    for module, imported in graph.items():
        top = module.split(".")[0]
        if module in below_settings:
            assert not imported, f"{module} imports {imported}"
        if module.startswith("dqn.settings"):
            upward = {name for name in imported if not name.startswith("dqn.settings")} - below_settings
            assert not upward, f"{module} imports above dqn/settings: {upward}"
        if top == "dqn":
            assert all(name.startswith("dqn") for name in imported), f"{module} imports a role: {imported}"
        if top in ("actor", "learner", "replay_server", "evaluator") and not module.endswith("__main__"):
            others = {name for name in imported if name.split(".")[0] not in (top, "dqn")}
            assert not others, f"{module} imports another role: {others}"
