"""The tree's layout: which folder may import which, and no import cycles.

The engine is a pure library that every door imports and that imports none of them;
what ships (engine, server, client, training) never reaches into the lab (`research/`)
or the contributor tools (`tools/`); and no two modules import each other, even
through an import inside a function (a late import that only hides a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.live_server import REPO_ROOT

PACKAGES = ("releaseops_arena", "server", "client", "training", "research", "tools")
SHIPPED = ("releaseops_arena", "server", "client", "training")
# The installed distribution maps these folders under the engine's namespace (pyproject.toml).
INSTALLED_AS = {
    "releaseops_arena.server": "server",
    "releaseops_arena.client": "client",
    "releaseops_arena.training": "training",
}
ALLOWED = {
    "releaseops_arena": {"releaseops_arena"},
    "client": {"client", "releaseops_arena"},
    "server": {"server", "client", "releaseops_arena"},
    "training": {"training", "client", "releaseops_arena"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def canonical(name: str) -> str:
    for installed, folder in INSTALLED_AS.items():
        if name == installed or name.startswith(installed + "."):
            return folder + name[len(installed) :]
    return name


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Every module of ours `path` imports, at any depth of its code."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [canonical(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = canonical(node.module or "")
            # `from pkg import mod` imports the submodule when there is one, else a name of pkg.
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (REPO_ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts]
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) for p in files}


def test_the_graph_sees_late_and_relative_imports():
    edges = graph()
    assert "releaseops_arena.policies.base" in edges["releaseops_arena.policies.planner"]  # relative
    assert "releaseops_arena.episode" in edges["releaseops_arena.tool_env"]
    assert "training.llm_policy" in edges["training.evaluate"]  # imported inside a function


def test_the_engine_imports_no_door_and_what_ships_never_imports_the_lab():
    wrong = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        if module.split(".")[0] in ALLOWED
        for target in targets
        if target.split(".")[0] not in ALLOWED[module.split(".")[0]]
    ]
    assert not wrong, wrong


def test_there_is_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[module] = 2
        path.pop()
        return None

    for module in sorted(edges):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, " -> ".join(cycle)
