"""Properties over generated sources: the formatter is idempotent and keeps meaning,
and no input, however broken, makes the parser raise anything but diagnostics."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from todoflow.dsl import try_parse
from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.formatter import format_source
from todoflow.dsl.strings import quote, quote_block

from ..compiler.test_fuzz import mutate
from ..conftest import EXAMPLES

NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True).filter(lambda n: n != "end")
VALUES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=24)
GAPS = st.sampled_from([" ", "  ", "\n", "\n\n", "\t", " # note\n", "\n    # a comment line\n"])
TEXT_KIND = st.booleans()


@st.composite
def texts(draw: st.DrawFn) -> str:
    value = draw(VALUES)
    return (
        quote_block(value, draw(st.sampled_from(["", "    ", "\t  "]))) if draw(TEXT_KIND) else quote(value)
    )


@st.composite
def tokens_of_step(draw: st.DrawFn, depth: int) -> list[str]:
    kind = draw(st.sampled_from(["regular", "todo_task"]))
    out = [kind, draw(NAMES), quote(draw(VALUES)), "{"]
    for _ in range(draw(st.integers(0, 5))):
        out += draw(item_tokens(kind, depth))
    return [*out, "}"]


@st.composite
def item_tokens(draw: st.DrawFn, kind: str, depth: int) -> list[str]:
    simple: list[list[str]] = [
        ["description", draw(texts())],
        ["success", draw(texts())],
        ["needs", quote(draw(VALUES)), ",", quote(draw(VALUES))],
        ["output", quote(draw(VALUES))],
        ["expect", "file", quote(draw(VALUES))],
        ["next", draw(st.one_of(NAMES, st.just("end")))],
        ["llm", draw(NAMES), quote(draw(VALUES))],
        ["conditional_llm", draw(NAMES), quote(draw(VALUES))],
        ["max_turns", str(draw(st.integers(0, 500)))],
        ["mode", "learn_code"],
        ["prompt", "work", draw(texts())],
        ["prompt", "intake", "from", quote(draw(VALUES))],
        ["generic", draw(st.sampled_from(["on", "off"]))],
    ]
    if kind == "todo_task":
        simple.append(draw(tasks_tokens()))
        if depth < 2:
            route = ["route", draw(NAMES), quote(draw(VALUES)), "when", draw(texts()), "{"]
            simple.append([*route, *draw(tokens_of_step(depth + 1)), "}"])
    return draw(st.sampled_from(simple))


@st.composite
def tasks_tokens(draw: st.DrawFn) -> list[str]:
    out = ["tasks", "{"]
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            label = [draw(NAMES), ":"] if draw(st.booleans()) else []
            after = ["after", draw(NAMES), ",", draw(NAMES)] if draw(st.booleans()) else []
            out += [*label, draw(texts()), "=>", draw(texts()), *after]
        else:
            out += ["constraint", draw(texts()), "on", draw(st.one_of(st.just("all"), NAMES))]
    return [*out, "}"]


@st.composite
def sources(draw: st.DrawFn) -> str:
    tokens = ["workflow", draw(NAMES), quote(draw(VALUES)), "{"]
    for _ in range(draw(st.integers(0, 3))):
        tokens += draw(st.sampled_from([["max_turns", "7"], ["llm", "p", '"m"']]))
    for _ in range(draw(st.integers(0, 3))):
        tokens += draw(tokens_of_step(0))
    tokens.append("}")
    return "".join(token + draw(GAPS) for token in tokens)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources())
def test_fmt_is_idempotent_and_keeps_meaning(source: str) -> None:
    parsed = try_parse(source)
    assert parsed.workflow is not None, parsed.diagnostics
    formatted = format_source(source)
    assert format_source(formatted) == formatted
    reparsed = try_parse(formatted).workflow
    assert reparsed == parsed.workflow
    assert reparsed is not None
    assert [c.text for c in reparsed.comments] == [c.text for c in parsed.workflow.comments]


def _assert_inside(diagnostic: Diagnostic, text: str) -> None:
    lines = text.split("\n")
    span = diagnostic.span
    assert 1 <= span.line <= span.end_line <= len(lines)
    assert 1 <= span.column <= len(lines[span.line - 1]) + 1
    assert 1 <= span.end_column <= len(lines[span.end_line - 1]) + 1
    assert diagnostic.message


SEEDS = [path.read_text(encoding="utf-8") for path in EXAMPLES]


@st.composite
def mutants(draw: st.DrawFn) -> str:
    return mutate(draw, draw(st.sampled_from(SEEDS)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_mutated_examples_give_only_diagnostics_inside_the_file(text: str) -> None:
    result = try_parse(text, "mutant.todoflow")
    for diagnostic in result.diagnostics:
        _assert_inside(diagnostic, text.replace("\r\n", "\n"))
        assert diagnostic.render(text)
    assert (result.workflow is None) == any(d.is_error for d in result.diagnostics)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_decoded_as_text_never_raise(data: bytes) -> None:
    text = data.decode("latin-1")
    for diagnostic in try_parse(text, "noise").diagnostics:
        _assert_inside(diagnostic, text.replace("\r\n", "\n"))


def test_huge_unbalanced_input_is_one_diagnostic() -> None:
    result = try_parse("{" * 2_000_000, "braces")
    assert [d.code for d in result.diagnostics] == ["E0001"]


def test_error_flood_is_capped() -> None:
    text = (
        'workflow w "W" {\n' + "".join(f'  regular s{i} "S" {{ sucess "x" }}\n' for i in range(200)) + "}\n"
    )
    result = try_parse(text)
    assert len(result.diagnostics) == 51
    assert result.diagnostics[-1].code == "E0009"


def test_examples_are_the_seeds(tmp_path: Path) -> None:
    assert len(SEEDS) >= 3
