"""The formatter: canonical layout, comments kept, idempotent, meaning unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from todoflow import parse
from todoflow.dsl.formatter import format_source, render

from ..conftest import EXAMPLES, FMT, VALID


@pytest.mark.parametrize("path", FMT, ids=lambda p: p.name)
def test_formatted_output(path: Path, snapshot: SnapshotAssertion) -> None:
    text = path.read_text(encoding="utf-8")
    formatted = format_source(text)
    assert formatted == snapshot
    assert format_source(formatted) == formatted
    assert parse(formatted) == parse(text)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_already_canonical(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert format_source(text) == text


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_formatting_keeps_meaning_and_comments(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    formatted = format_source(text)
    assert parse(formatted) == parse(text)
    assert [c.text for c in parse(formatted).comments] == [c.text for c in parse(text).comments]
    assert format_source(formatted) == formatted


def test_canonical_layout() -> None:
    text = 'workflow w "W" { max_turns 3 regular a "A" { description "d" next b } regular b "B" {} }'
    assert format_source(text) == (
        'workflow w "W" {\n'
        "    max_turns 3\n"
        "\n"
        '    regular a "A" {\n'
        '        description "d"\n'
        "        next b\n"
        "    }\n"
        "\n"
        '    regular b "B" {\n'
        "    }\n"
        "}\n"
    )


def test_render_needs_no_source() -> None:
    workflow = parse('workflow w "W" {\n    # dropped by render without comments\n}\n')
    bare = parse(render(workflow.__class__(workflow.id, workflow.title, workflow.members, workflow.span)))
    assert bare == workflow
    assert bare.comments == ()


def test_strings_are_quoted_back_exactly() -> None:
    text = 'workflow w "a \\"b\\" \\\\ \\t \\u0001 é" {\n}\n'
    formatted = format_source(text)
    assert parse(formatted).title.value == 'a "b" \\ \t \x01 é'
    assert formatted == text
