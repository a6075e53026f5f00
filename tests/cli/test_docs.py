"""Docs that run: every `todoflow` block in the docs checks clean, and every
`todoflow check` block renders exactly the diagnostics shown in the `text` block after it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from todoflow.api import analyze
from todoflow.dsl.diagnostics import render_all

from ..conftest import ROOT, run_cli

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w ]*)\n(.*?)^```\n", re.M | re.S)


def _blocks(path: Path) -> list[tuple[str, str]]:
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def _cases() -> list[tuple[str, str, str | None]]:
    cases = []
    for path in DOCS:
        blocks = _blocks(path)
        for index, (info, body) in enumerate(blocks):
            if info == "todoflow":
                cases.append((f"{path.name}#{index}", body, None))
            elif info == "todoflow check":
                following = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
                assert following[0] == "text", f"{path.name}: an error example needs its output"
                cases.append((f"{path.name}#{index}", body, following[1]))
    return cases


CASES = _cases()


def test_the_docs_have_examples() -> None:
    assert sum(expected is None for _, _, expected in CASES) >= 5
    assert sum(expected is not None for _, _, expected in CASES) >= 6


@pytest.mark.parametrize(("where", "source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_doc_example(where: str, source: str, expected: str | None) -> None:
    result = analyze(source, "example.todoflow", ROOT / "docs")
    if expected is None:
        assert [d for d in result.diagnostics if d.severity != "note"] == [], where
    else:
        assert render_all(result.diagnostics, result.sources).rstrip("\n") == expected.rstrip("\n")


def test_readme_console_session_is_what_the_cli_prints(tmp_path: Path) -> None:
    blocks = _blocks(ROOT / "README.md")
    source = next(body for info, body in blocks if info == "todoflow")
    session = next(body for info, body in blocks if info == "console")
    (tmp_path / "release.todoflow").write_text(source)
    commands = re.split(r"^\$ ", session, flags=re.M)[1:]
    assert commands
    for command in commands:
        line, _, expected = command.partition("\n")
        words = line.split()
        assert words[0] == "todoflow"
        result = run_cli(*words[1:], cwd=tmp_path)
        assert result.stderr + result.stdout == expected, line


PYTHON = [
    (f"{path.name}#{i}", body)
    for path in DOCS
    for i, (info, body) in enumerate(_blocks(path))
    if info == "python"
]


@pytest.mark.parametrize(("where", "code"), PYTHON, ids=[p[0] for p in PYTHON])
def test_python_examples_run(where: str, code: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples"
    )  # the examples' paths, without writing in the repo
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    exec(compile(code, where, "exec"), {"__name__": "docs_example"})
