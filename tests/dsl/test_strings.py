"""String literals: decoding and quoting are mirror images."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from todoflow import parse
from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.strings import decode_block, decode_plain, quote, quote_block

values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


@given(values)
def test_plain_quote_round_trips(value: str) -> None:
    problems: list[Diagnostic] = []
    assert decode_plain(quote(value), "x", 1, 1, problems) == value
    assert problems == []


@given(values, st.sampled_from(["", "  ", "    ", "\t"]))
def test_block_quote_round_trips(value: str, indent: str) -> None:
    problems: list[Diagnostic] = []
    assert decode_block(quote_block(value, indent), "x", 1, 1, problems) == value
    assert problems == []


@given(values)
def test_block_quote_round_trips_through_the_parser(value: str) -> None:
    source = f'workflow w "W" {{ regular a "A" {{ description {quote_block(value, "        ")} }} }}'
    step = parse(source).steps[0]
    assert step.items[0].text.value == value  # type: ignore[union-attr]


def test_block_keeps_relative_indentation_and_drops_edge_lines() -> None:
    raw = '"""\n    a\n      b\n\n    c\n    """'
    assert decode_block(raw, "x", 1, 1, []) == "a\n  b\n\nc"


def test_block_on_one_line_is_dedented_like_any_other() -> None:
    assert decode_block('"""  one line  """', "x", 1, 1, []) == "one line  "


def test_bad_escape_is_reported_at_its_column() -> None:
    problems: list[Diagnostic] = []
    decode_plain('"ab\\qc"', "f", 4, 10, problems)
    (problem,) = problems
    assert (problem.code, problem.span.line, problem.span.column, problem.span.end_column) == (
        "E0006",
        4,
        13,
        15,
    )


def test_bad_escape_in_block_is_reported_on_its_line() -> None:
    problems: list[Diagnostic] = []
    decode_block('"""\n    ok\n      bad \\x\n    """', "f", 1, 5, problems)
    (problem,) = problems
    assert (problem.span.line, problem.span.column) == (3, 11)
