"""Every example compiles, and all its artifacts are pinned: through the pytest plugin
that authors use (plan, step config, machine table, Mermaid), and file by file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

import todoflow

from .conftest import EXAMPLES, relative


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_through_the_plugin(path: Path, todoflow_snapshot: Callable[[Path], None]) -> None:
    todoflow_snapshot(path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_artifact_files(path: Path, snapshot: SnapshotAssertion) -> None:
    compiled = todoflow.compile(path, path=relative(path))
    compiled.raise_for_errors()
    files = dict(compiled.artifacts.files)
    others = {name: text for name, text in files.items() if not name.endswith(".json")}
    assert others == snapshot
