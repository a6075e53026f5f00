"""The fast parse (`dsl.lalr`) runs tables made ahead of time from the grammar: they are
what Lark makes of the grammar now, and they build the same tree as Lark's parser."""

from __future__ import annotations

from pathlib import Path

import lark
import pytest

from bench.workload import big_source
from todoflow.dsl.builder import Builder
from todoflow.dsl.grammar import load_parser, tables_text
from todoflow.dsl.lalr import TABLES_PATH, Parser, Rejected
from todoflow.dsl.lexer import Token

from ..conftest import EXAMPLES, INVALID, VALID, WARNING


def test_the_shipped_tables_are_what_lark_makes_of_the_grammar() -> None:
    assert TABLES_PATH.read_text(encoding="utf-8") == tables_text(), (
        "grammars/todoflow.tables.json is out of date: run `python -m todoflow.dsl.grammar`"
    )


def _both(text: str) -> tuple[object, list[Token], object, list[lark.Token]]:
    """The tree and comments of the fast parse, then of Lark's (an exception for a rejection)."""
    fast_comments: list[Token] = []
    lark_comments: list[lark.Token] = []
    builder = Builder()
    try:
        fast: object = Parser(builder, fast_comments).parse(text)
    except Rejected as error:
        fast = error
    builder.reset("<string>")
    try:
        slow: object = load_parser(builder, lark_comments).parse(text)
    except lark.exceptions.UnexpectedInput as error:
        slow = error
    return fast, fast_comments, slow, lark_comments


@pytest.mark.parametrize("path", [*VALID, *WARNING, *EXAMPLES], ids=lambda p: p.name)
def test_the_fast_parse_builds_the_tree_lark_builds(path: Path) -> None:
    fast, fast_comments, slow, lark_comments = _both(path.read_text(encoding="utf-8"))
    assert fast == slow
    assert [(t.type, str(t), t.line, t.column, t.start_pos) for t in fast_comments] == [
        (t.type, str(t), t.line, t.column, t.start_pos) for t in lark_comments
    ]


def test_the_fast_parse_builds_the_tree_lark_builds_for_a_large_workflow() -> None:
    fast, _, slow, _ = _both(big_source(steps=5, tasks=20))
    assert fast == slow


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_what_lark_rejects_the_fast_parse_rejects(path: Path) -> None:
    fast, _, slow, _ = _both(path.read_text(encoding="utf-8"))
    assert isinstance(slow, Exception) == isinstance(fast, Rejected)
