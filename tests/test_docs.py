"""Docs that run: every `todoflow` block in the docs parses, and every `todoflow error`
block renders exactly the diagnostics shown in the `text` block after it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from todoflow.dsl import try_parse
from todoflow.dsl.diagnostics import render_all

from .conftest import ROOT

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
            elif info == "todoflow error":
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
    result = try_parse(source, "example.todoflow")
    if expected is None:
        assert result.diagnostics == (), where
    else:
        assert render_all(result.diagnostics, {"example.todoflow": source}).rstrip("\n") == expected.rstrip(
            "\n"
        )
