"""Golden files: every valid fixture checks clean; every invalid or warning fixture is
pinned to its rendered diagnostics (a fixture without a snapshot fails)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from todoflow.api import Analysis, analyze
from todoflow.dsl.diagnostics import render_all

from ..conftest import EXAMPLES, INVALID, ROOT, VALID, WARNING, relative


def _analyze(path: Path) -> Analysis:
    return analyze(path.read_text(encoding="utf-8"), relative(path), path.parent)


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: p.name)
def test_valid_source_checks_clean(path: Path) -> None:
    result = _analyze(path)
    assert [d for d in result.diagnostics if d.severity != "note"] == []
    assert result.workflow is not None


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_source_diagnostics(path: Path, snapshot: SnapshotAssertion) -> None:
    result = _analyze(path)
    assert result.workflow is None
    assert any(d.is_error for d in result.diagnostics)
    assert render_all(result.diagnostics, result.sources) == snapshot


@pytest.mark.parametrize("path", WARNING, ids=lambda p: p.name)
def test_warning_source_diagnostics(path: Path, snapshot: SnapshotAssertion) -> None:
    result = _analyze(path)
    assert result.workflow is not None
    assert {d.severity for d in result.diagnostics} == {"warning"}
    assert render_all(result.diagnostics, result.sources) == snapshot


def test_several_independent_errors_are_each_reported_once() -> None:
    path = next(p for p in INVALID if p.name == "several-errors.todoflow")
    result = _analyze(path)
    assert [d.span.line for d in result.diagnostics] == [3, 6, 10, 12, 15, 18]


def test_every_documented_code_has_a_fixture_and_every_code_is_documented() -> None:
    documented = set(re.findall(r"^### ([EWN]\d{4})", (ROOT / "docs" / "language.md").read_text(), re.M))
    produced = {d.code for path in INVALID + WARNING + EXAMPLES for d in _analyze(path).diagnostics}
    assert produced - documented == set()
    assert documented - produced <= {
        "E0007",
        "E0008",
        "E0009",
    }  # not UTF-8; a lone surrogate; too many errors: tested in test_cli/test_hostile_input/test_properties
