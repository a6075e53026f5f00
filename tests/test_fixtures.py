"""Golden files: every valid fixture parses clean, every invalid one is pinned to its
rendered diagnostics (a fixture without a snapshot fails)."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from todoflow.dsl import try_parse
from todoflow.dsl.diagnostics import render_all

from .conftest import EXAMPLES, INVALID, VALID, relative


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: p.name)
def test_valid_source_parses_without_diagnostics(path: Path) -> None:
    result = try_parse(path.read_text(encoding="utf-8"), relative(path))
    assert result.diagnostics == ()
    assert result.workflow is not None


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_source_diagnostics(path: Path, snapshot: SnapshotAssertion) -> None:
    text = path.read_text(encoding="utf-8")
    name = relative(path)
    result = try_parse(text, name)
    assert result.workflow is None
    assert any(d.is_error for d in result.diagnostics)
    assert render_all(result.diagnostics, {name: text}) == snapshot


def test_several_independent_errors_are_each_reported_once() -> None:
    path = next(p for p in INVALID if p.name == "several-errors.todoflow")
    result = try_parse(path.read_text(encoding="utf-8"), "several.todoflow")
    assert [d.span.line for d in result.diagnostics] == [3, 7, 11, 12, 15, 18]
