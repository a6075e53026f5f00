"""The layers hold: `dsl` <- `compiler` <- `runtime` <- `todoflow` (CLI, API, plugin).

Every module's imports are read (those under `TYPE_CHECKING` and inside functions too):
an import that points up a layer fails here, whatever the docstrings say."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

# package folder -> its layer; a module may import its own layer and those below
LAYERS = {"grammars": 0, "dsl": 1, "compiler": 2, "runtime": 3, "todoflow": 4}


def _modules() -> list[Path]:
    return sorted(p for folder in LAYERS for p in (ROOT / folder).rglob("*.py"))


def _package(path: Path) -> str:
    return path.relative_to(ROOT).parts[0]


def _imported(text: str, package: str) -> list[tuple[int, str]]:
    """(line, the todoflow layer it names) for each import of a module of `package`."""
    tree = ast.parse(text)
    found = []
    for statement in ast.walk(tree):
        names: list[str] = []
        if isinstance(statement, ast.Import):
            names = [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom):
            if statement.level:  # `.`: the module's own package; `..`: the top one
                names = [f"todoflow.{package}" if statement.level == 1 else "todoflow"]
            else:
                module = statement.module or ""
                names = [f"{module}.{a.name}" if module == "todoflow" else module for a in statement.names]
        for name in names:
            parts = name.split(".")
            if parts[0] != "todoflow":
                continue
            layer = parts[1] if len(parts) > 1 and parts[1] in LAYERS else "todoflow"
            found.append((statement.lineno, layer))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_imports_point_down_the_layers(path: Path) -> None:
    own = _package(path)
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports todoflow.{layer}"
        if layer != "todoflow"
        else f"{path.relative_to(ROOT)}:{line} imports the top layer (todoflow's CLI/API)"
        for line, layer in _imported(path.read_text(encoding="utf-8"), own)
        if LAYERS[layer] > LAYERS[own]
    ]
    assert not wrong, f"`{own}` may import only its own layer and those below it:\n" + "\n".join(wrong)


def test_the_check_sees_every_form_of_import() -> None:
    text = (
        "from todoflow.runtime import engine\n"
        "import todoflow.compiler.machine\n"
        "from todoflow import api\n"
        "from . import x\n"
        "from .. import y\n"
    )
    found = _imported(text, "dsl")
    assert found == [(1, "runtime"), (2, "compiler"), (3, "todoflow"), (4, "dsl"), (5, "todoflow")]
