"""The language server's pure parts, in process: position conversion both ways, the
keyword table against docs/language.md, and that no text makes the tolerant scan, the
outline, hover or completion raise."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from lsprotocol import types

from todoflow.dsl.spans import Span
from todoflow.lsp import completion, hover, keywords
from todoflow.lsp.outline import keyword_types
from todoflow.lsp.positions import LineIndex
from todoflow.lsp.snapshot import Snapshot

from ..conftest import ROOT
from ..dsl.test_properties import mutants

UTF8, UTF16, UTF32 = (
    types.PositionEncodingKind.Utf8,
    types.PositionEncodingKind.Utf16,
    types.PositionEncodingKind.Utf32,
)


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [(UTF16, 5), (UTF32, 4), (UTF8, 7)],  # the closing quote of x="😋" (the LSP spec's example)
)
def test_a_character_outside_the_bmp_counts_as_the_encoding_says(encoding: str, expected: int) -> None:
    lines = LineIndex('x="😋"', encoding)
    assert lines.position(1, 5) == types.Position(0, expected)
    assert lines.point(types.Position(0, expected)) == (1, 5)


def test_line_starts_line_ends_and_beyond() -> None:
    lines = LineIndex("ab\n\tcd\n")
    assert lines.position(1, 1) == types.Position(0, 0)
    assert lines.position(2, 1) == types.Position(1, 0)
    assert lines.position(2, 4) == types.Position(1, 3)  # a tab is one unit
    assert lines.position(2, 99) == types.Position(1, 3)  # clamped to the line's end
    assert lines.position(9, 1) == types.Position(2, 0)  # past the last line: the end
    assert lines.range(Span("f", 1, 3, 2, 1)) == types.Range(types.Position(0, 2), types.Position(1, 0))
    assert lines.point(types.Position(1, 3)) == (2, 4)
    assert lines.end() == types.Position(2, 0)


def test_crlf_and_a_byte_order_mark_keep_the_editor_columns() -> None:
    # spans are measured on the text as parsed: no mark, LF line ends
    lines = LineIndex("\ufeffab\r\ncd\r\n")
    assert lines.position(1, 1) == types.Position(0, 1)
    assert lines.position(1, 3) == types.Position(0, 3)
    assert lines.position(2, 3) == types.Position(1, 2)  # the CR is not part of the line
    assert lines.point(types.Position(0, 1)) == (1, 1)
    assert lines.point(types.Position(1, 2)) == (2, 3)


_ROW = re.compile(r"^\| (`[^|]+`(?: / `[^|]+`)?) \| ([^|]+) \| ([^|]+) \|$", re.M)


def test_the_keyword_table_is_the_one_in_the_language_reference() -> None:
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    tables = text[
        text.index("### Defaults") : text.index("### Routes")
    ]  # the defaults' and the steps' tables
    rows = {(form, meaning.strip(), emitted.strip()) for form, meaning, emitted in _ROW.findall(tables)}
    assert len(rows) == 14
    assert {(k.form, k.meaning, k.emitted) for k in keywords.TABLE.values()} == rows


def test_every_keyword_of_the_grammar_has_a_description() -> None:
    words = set(keyword_types().values())
    assert {w for w in words if keywords.describe(w) is None} == set()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_no_text_makes_the_outline_hover_or_completion_raise(text: str) -> None:
    snapshot = Snapshot("file:///m.todoflow", "/m.todoflow", 1, text, UTF16)
    names = snapshot.outline.names
    lines = snapshot.text.split("\n")
    for line in range(1, len(lines) + 1, max(1, len(lines) // 6)):
        for column in (1, len(lines[line - 1]) // 2 + 1, len(lines[line - 1]) + 1):
            hover.hover(snapshot, (line, column))
            completion.complete(snapshot, (line, column))
    for name in names:
        assert 1 <= name.span.line <= len(lines)


@pytest.mark.parametrize(
    "text",
    [
        'workflow w "W" {\n    max_turns#60\n    regular a "A" {\n    }\n}\n',  # hypothesis found it
        'workflow w "W" {\n  regular a "A" {\n    description#x\n  }\n}\n',
    ],
)
def test_a_missing_number_or_string_is_stood_in_for_with_a_value_the_builder_takes(text: str) -> None:
    snapshot = Snapshot("file:///m.todoflow", "/m.todoflow", 1, text, UTF16)
    assert snapshot.outline.names is not None
    hover.hover(snapshot, (2, 5))
    completion.complete(snapshot, (2, 5))


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ('            tag: "Tag" => "tagged" after ', ["build", "notes"]),  # not `tag` itself
        ('            tag: "Tag" => "tagged" after build, ', ["notes"]),  # nor one already listed
        ('            "Tag" => "tagged" after notes, ', ["build"]),
        ('            constraint "c" on build, ', ["notes"]),  # `on` lists any task, once
    ],
)
def test_completion_after_after_offers_the_other_tasks_not_yet_listed(line: str, offered: list[str]) -> None:
    text = "\n".join(
        [
            'workflow w "W" {',
            '    todo_task s "S" {',
            "        tasks {",
            line,
            '            build: "Build" => "built"',
            '            notes: "Notes" => "noted"',
            "        }",
            "    }",
            "}",
            "",
        ]
    )
    snapshot = Snapshot("file:///w.todoflow", "/w.todoflow", 1, text, UTF16)
    items = completion.complete(snapshot, (4, len(line) + 1))
    assert sorted(i.label for i in items) == offered
