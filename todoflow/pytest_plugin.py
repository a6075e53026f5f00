"""A pytest plugin for workflow authors: pin a compiled workflow with one line.

    def test_release_flow(todoflow_snapshot):
        todoflow_snapshot("flows/release.todoflow")

The `todoflow_snapshot` fixture compiles the workflow (failing the test with every
diagnostic if it does not compile) and compares, with syrupy, its plan.json,
step_config.json, the machine's transition table and its Mermaid diagram against
the stored snapshots; `pytest --snapshot-update` writes them. Installed as a
`pytest11` entry point, so no conftest is needed. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SnapshotWorkflow = Callable[[str | Path], None]


@pytest.fixture
def todoflow_snapshot(snapshot: Any, request: pytest.FixtureRequest) -> SnapshotWorkflow:
    """Compile a `.todoflow` file and assert its artifacts match the snapshots."""
    from todoflow.api import compile
    from todoflow.compiler.diagrams import markdown

    root = request.config.rootpath

    def check(path: str | Path) -> None:
        file = Path(path)
        shown = file.resolve().relative_to(root) if file.resolve().is_relative_to(root) else file
        compiled = compile(file, path=shown.as_posix())
        if not compiled.ok:
            pytest.fail(f"{shown} does not compile:\n" + _render(compiled), pytrace=False)
        assert compiled.plan == snapshot(name="plan.json")
        assert compiled.step_config == snapshot(name="step_config.json")
        assert markdown(compiled.artifacts.machine) == snapshot(name="machine")
        assert compiled.mermaid == snapshot(name="mermaid")

    return check


def _render(compiled: Any) -> str:
    from todoflow.dsl.diagnostics import render_all

    return render_all(compiled.diagnostics, compiled.sources)
