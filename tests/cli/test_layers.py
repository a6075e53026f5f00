"""The layers hold: `dsl` <- `compiler` <- `runtime` <- `todoflow` (CLI, API, plugin), and
inside `runtime/` the core and its wings (`store/`, `agents/`, `serve/`, `views/`).

Every module's imports are read (those under `TYPE_CHECKING` and inside functions too)
and resolved to the module they name: an import that points up a layer, or across the
wings against their rules, fails here, whatever the docstrings say; so does an import
cycle between the runtime's modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ..conftest import ROOT

# package folder -> its layer; a module may import its own layer and those below
LAYERS = {"grammars": 0, "dsl": 1, "compiler": 2, "runtime": 3, "todoflow": 4}
WINGS = ("store", "agents", "serve", "views")
PORT = "todoflow.runtime.store.base"  # the store's port: the core's own vocabulary
# wing (or `core`) -> the wings its modules may import, besides the core (the port is always allowed)
WING_RULES = {
    "core": set(),
    "store": {"store"},
    "views": {"views"},
    "agents": {"agents", "views"},
    "serve": {"serve", "agents", "views"},
}


def _modules() -> list[Path]:
    return sorted(p for folder in LAYERS for p in (ROOT / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    """The dotted name a file is imported by (`runtime/store/base.py` -> `todoflow.runtime.store.base`)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts if parts[0] == "todoflow" else ["todoflow", *parts])


def _file(module: str) -> Path | None:
    parts = module.split(".")[1:]
    if not parts:
        return ROOT / "todoflow" / "__init__.py"
    base = ROOT / (parts[0] if parts[0] in LAYERS else "todoflow")
    rest = parts[1:] if parts[0] in LAYERS else parts
    for candidate in (base.joinpath(*rest).with_suffix(".py"), base.joinpath(*rest, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def imported(text: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) for each todoflow module `module`'s text imports, resolved (a name
    imported from a package is the submodule of that name where there is one)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for statement in ast.walk(ast.parse(text)):
        names: list[str] = []
        if isinstance(statement, ast.Import):
            names = [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom):
            source = statement.module or ""
            if statement.level:
                base = package.split(".")[: len(package.split(".")) - statement.level + 1]
                source = ".".join([*base, *([source] if source else [])])
            for alias in statement.names:
                submodule = f"{source}.{alias.name}"
                names.append(submodule if _file(submodule) is not None else source)
        found += [(statement.lineno, name) for name in names if name.split(".")[0] == "todoflow"]
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "todoflow"


def wing(module: str) -> str | None:
    """`core`, a wing's name, or None for a module outside the runtime."""
    parts = module.split(".")
    if parts[:2] != ["todoflow", "runtime"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in WINGS else "core"


def _imports(path: Path) -> list[tuple[int, str]]:
    return imported(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_imports_point_down_the_layers(path: Path) -> None:
    own = layer(module_name(path))
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for line, name in _imports(path)
        if LAYERS[layer(name)] > LAYERS[own]
    ]
    assert not wrong, f"`{own}` may import only its own layer and those below it:\n" + "\n".join(wrong)


def _runtime_modules() -> list[Path]:
    return sorted((ROOT / "runtime").rglob("*.py"))


@pytest.mark.parametrize("path", _runtime_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_wings_import_by_their_rules(path: Path) -> None:
    """The core imports no wing but the store's port; views import only the core and the
    port; agents never import serve; an adapter imports no other wing."""
    own = wing(module_name(path))
    assert own is not None
    allowed = WING_RULES[own]
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for line, name in _imports(path)
        if (target := wing(name)) not in (None, "core", own)
        and name != PORT
        and not name.startswith(PORT + ".")
        and target not in allowed
    ]
    assert not wrong, (
        f"`{own}` may import only the core, the store's port and {sorted(allowed)}:\n" + "\n".join(wrong)
    )


def test_the_runtime_modules_form_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for path in _runtime_modules():
        name = module_name(path)
        graph[name] = {
            target
            for _, target in _imports(path)
            if wing(target) is not None and target != name and not name.startswith(target + ".")
        }
    cycle = _a_cycle(graph)
    assert cycle is None, "an import cycle: " + " -> ".join(cycle or [])


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` (as the modules along it), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


def test_the_checks_see_every_form_of_import_and_find_a_cycle() -> None:
    text = (
        "from todoflow.runtime import engine\n"
        "import todoflow.compiler.machine\n"
        "from todoflow import api\n"
        "from . import nodes\n"
        "from .. import runtime\n"
        "from ..views.card import card_text\n"
    )
    found = imported(text, "todoflow.runtime.agents.driver")
    assert found == [
        (1, "todoflow.runtime.engine"),
        (2, "todoflow.compiler.machine"),
        (3, "todoflow.api"),
        (4, "todoflow.runtime.agents"),
        (5, "todoflow.runtime"),
        (6, "todoflow.runtime.views.card"),
    ]
    assert [layer(name) for _, name in found] == [
        "runtime",
        "compiler",
        "todoflow",
        "runtime",
        "runtime",
        "runtime",
    ]
    assert [wing(name) for _, name in found] == ["core", None, None, "agents", "core", "views"]
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None
