"""The fuzzer's large inputs (issue 21, items 11 and 12): what an error echoes of a huge
input is cut to a documented length, and a file with thousands of diagnostics on one
long line is rendered in time linear in its size."""

from __future__ import annotations

from todoflow.compiler.analysis import analyze
from todoflow.dsl.diagnostics import ECHOED, TodoflowError, clipped, excerpt, render_all
from todoflow.dsl.spans import Span

from ..conftest import run_cli

HUGE = "a" * 100_000


def test_an_echoed_word_is_cut_to_its_documented_length() -> None:
    assert clipped(f"no run `{HUGE}` here") == f"no run `{'a' * (ECHOED - 1)}…(+99,802 characters) here"
    assert clipped("short words stay whole") == "short words stay whole"
    assert len(str(TodoflowError(f"no step `{HUGE}`"))) < ECHOED + 50


def test_a_huge_id_is_not_echoed_whole_by_check_or_status() -> None:
    text = (
        f'workflow w "W" {{\n    regular a "A" {{\n        description "d"\n        next {HUGE}\n    }}\n}}\n'
    )
    analysis = analyze(text, "big.todoflow", None)
    rendered = render_all(analysis.diagnostics, analysis.sources)
    assert "characters) but there is no step" in rendered and len(rendered) < 2_000
    status = run_cli("status", HUGE)
    assert status.returncode == 1 and "(+99,8" in status.stderr and len(status.stderr) < 1_000


class _CountedSplits(str):
    """A source that counts how often it is split into lines."""

    splits = 0

    def split(self, *args: object, **kwargs: object) -> list[str]:  # type: ignore[override]
        type(self).splits += 1
        return super().split(*args, **kwargs)  # type: ignore[arg-type]


def test_a_long_needs_line_with_a_diagnostic_per_path_is_split_once() -> None:
    """500 refused paths on one line: the source is split into lines once, not once per
    diagnostic (which made a 500 KB line take seconds, quadratic in the line)."""
    line = ", ".join(f'"/abs/{i}.json"' for i in range(500))
    text = f'workflow w "W" {{\n    regular a "A" {{\n        needs {line}\n    }}\n}}\n'
    analysis = analyze(text, "needs.todoflow", None)
    assert len(analysis.diagnostics) == 500
    source = _CountedSplits(text)
    render_all(analysis.diagnostics, {"needs.todoflow": source})
    assert _CountedSplits.splits == 1


def test_an_excerpt_shows_control_characters_as_replacements_and_tabs_as_spaces() -> None:
    source = 'a\n\tnext "bell\x07 esc\x1b" here\n'
    shown = excerpt(source, Span("odd.todoflow", 2, 2, 2, 6))
    assert shown[1] == '2 |     next "bell\ufffd esc\ufffd" here'
    assert shown[2] == "  |     ^^^^"  # under `next`, the tab's width counted
    assert excerpt("plain line\n", Span("p.todoflow", 1, 1, 1, 6))[1] == "1 | plain line"
