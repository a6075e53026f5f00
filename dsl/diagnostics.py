"""Errors as values: every stage returns diagnostics instead of raising.

A diagnostic knows its code, severity, message, span, help and notes, and renders
itself as a caret excerpt for people (in colour when asked: the CLI asks on a terminal)
or as a plain dict for tools (`--format json`).
`TodoflowError` is the root of every error todoflow raises on purpose; `SourceError`,
raised by the public API for a source with errors, carries the diagnostics. What a
message echoes of its input is cut to `ECHOED` characters a word (`clipped`), so a
100,000-character id is not printed whole.
Imports nothing but `dsl.spans`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeAlias

from .nodes import node
from .spans import Span

Severity: TypeAlias = Literal["error", "warning", "note"]
JsonDict: TypeAlias = dict[str, object]

_TAB = "    "
_MAX_EXCERPT_LINES = 4
_MAX_WIDTH = 100
# SGR codes, as rustc and ruff colour their diagnostics
_SEVERITY_STYLE: dict[str, str] = {"error": "1;31", "warning": "1;33", "note": "1;36"}
_BOLD, _GUTTER = "1", "1;34"
ECHOED = 200  # characters of one word (a run without spaces) a message echoes whole
_LONG_WORD = re.compile(rf"\S{{{ECHOED + 1},}}")


def clipped(text: str) -> str:
    """`text` with each word longer than `ECHOED` characters cut, saying how much was left
    out: an error echoes what it was given, and what it was given may be huge."""
    return _LONG_WORD.sub(lambda m: f"{m[0][:ECHOED]}…(+{len(m[0]) - ECHOED:,} characters)", text)


def _paint(text: str, style: str | None) -> str:
    return f"\x1b[{style}m{text}\x1b[0m" if style and text else text


@node
class Note:
    """A secondary remark, pointing at another place when it has a span."""

    message: str
    span: Span | None = None


@node
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Span
    help: str | None = None
    notes: tuple[Note, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def render(self, source: str | None = None, colour: bool = False) -> str:
        """`file:line:col: severity[CODE]: message`, the excerpt, then help and notes;
        with `colour`, styled with terminal escape codes (the text is the same)."""
        style = _SEVERITY_STYLE[self.severity] if colour else None
        bold = _BOLD if colour else None
        lines = [
            f"{_paint(f'{self.span}:', bold)} {_paint(f'{self.severity}[{self.code}]:', style)} "
            f"{_paint(clipped(self.message), bold)}"
        ]
        if source is not None and self.span.line:
            lines += excerpt(source, self.span, style, colour)
        if self.help:
            lines.append(f"   {_paint('= help:', bold)} {clipped(self.help)}")
        for note in self.notes:
            where = f" ({note.span})" if note.span else ""
            lines.append(f"   {_paint('= note:', bold)} {clipped(note.message)}{where}")
            if note.span is not None and source is not None and note.span.path == self.span.path:
                lines += excerpt(source, note.span, _SEVERITY_STYLE["note"] if colour else None, colour)
        return "\n".join(lines)

    def to_json(self) -> JsonDict:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": clipped(self.message),
            "help": clipped(self.help) if self.help else self.help,
            "path": self.span.path,
            "line": self.span.line,
            "column": self.span.column,
            "end_line": self.span.end_line,
            "end_column": self.span.end_column,
            "notes": [_note_json(n) for n in self.notes],
        }


def _note_json(note: Note) -> JsonDict:
    if note.span is None:
        return {"message": clipped(note.message)}
    return {
        "message": clipped(note.message),
        "path": note.span.path,
        "line": note.span.line,
        "column": note.span.column,
    }


def excerpt(source: str, span: Span, carets: str | None = None, colour: bool = False) -> list[str]:
    """The lines a span covers, each with carets under the covered part (in the style
    `carets`, and the gutter styled too, with `colour`)."""
    gutter_style = _GUTTER if colour else None
    source_lines = _lines(source)
    last = min(span.end_line, len(source_lines))
    numbers = list(range(span.line, last + 1))
    if len(numbers) > _MAX_EXCERPT_LINES:
        numbers = [*numbers[:2], -1, *numbers[-1:]]
    width = len(str(last))
    gutter = _paint(" " * width + " |", gutter_style)
    out = [gutter]
    for number in numbers:
        if number == -1:
            out.append(_paint(" " * width + " ...", gutter_style))
            continue
        raw = source_lines[number - 1].rstrip("\r") if number <= len(source_lines) else ""
        start = span.column if number == span.line else _first_non_blank(raw)
        end = span.end_column if number == span.end_line else len(raw) + 1
        shown, caret_start, caret_end = _visible(raw, start, end)
        out.append(f"{_paint(f'{number:>{width}} |', gutter_style)} {shown}".rstrip())
        out.append(f"{gutter} {' ' * caret_start}{_paint('^' * max(1, caret_end - caret_start), carets)}")
    return out


@functools.lru_cache(maxsize=4)
def _lines(source: str) -> tuple[str, ...]:
    """A source's lines, split once for all its excerpts: a file with thousands of
    diagnostics on one long line would otherwise be split again for each (quadratic)."""
    return tuple(source.split("\n"))


def _first_non_blank(line: str) -> int:
    return len(line) - len(line.lstrip()) + 1


def _visible(line: str, start: int, end: int) -> tuple[str, int, int]:
    """The line as shown (clipped around the span when very long, tabs as spaces, no
    control characters) and the 0-based caret range in the shown text."""
    left = max(0, min(start - 1 - _MAX_WIDTH // 4, len(line) - _MAX_WIDTH))
    part = line[left : left + _MAX_WIDTH]
    prefix = "..." if left else ""
    suffix = "..." if left + _MAX_WIDTH < len(line) else ""
    caret_start = len(prefix) + _width(part[: max(0, start - 1 - left)])
    caret_end = len(prefix) + _width(part[: max(0, max(start, end) - 1 - left)])
    shown = part.replace("\t", _TAB)
    if not shown.isprintable():  # rare: checked for the whole part at once first
        shown = "".join(c if c.isprintable() else "\ufffd" for c in shown)
    return prefix + shown + suffix, caret_start, caret_end


def _width(text: str) -> int:
    return len(text.replace("\t", _TAB))


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


def render_all(diagnostics: Sequence[Diagnostic], sources: Mapping[str, str], colour: bool = False) -> str:
    """Human text for a batch of diagnostics, each followed by a blank line."""
    return "".join(d.render(sources.get(d.span.path), colour) + "\n\n" for d in diagnostics)


def sort_key(diagnostic: Diagnostic) -> tuple[str, int, int, str]:
    span = diagnostic.span
    return (span.path, span.line, span.column, diagnostic.code)


class TodoflowError(Exception):
    """The root of every error todoflow raises on purpose: catch this one class.

    An error renders itself: `str(error)` (and `render()`) is the message for people,
    complete without a traceback. Subclasses say what went wrong where they are raised;
    `diagnostics` holds the source diagnostics behind it, if any."""

    diagnostics: tuple[Diagnostic, ...] = ()

    def __str__(self) -> str:
        return clipped(super().__str__())

    def render(self) -> str:
        return str(self)


class SourceError(TodoflowError):
    """A source or plan with errors: every diagnostic, rendered with its excerpt."""

    def __init__(self, diagnostics: Sequence[Diagnostic], sources: Mapping[str, str]) -> None:
        self.diagnostics = tuple(diagnostics)
        self.sources = dict(sources)
        super().__init__(self.render())

    def render(self) -> str:
        return render_all(self.diagnostics, self.sources).rstrip("\n")
