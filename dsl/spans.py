"""Source positions. The first stage's vocabulary: every later stage keeps them.

A span is 1-based; `end_column` is exclusive, so a one-character token at column 5
ends at column 6 and a zero-width span (end of file) has `end_column == column`.
"""

from __future__ import annotations

from typing import NamedTuple


class Span(NamedTuple):
    """Where a construct stands in its file (a tuple: cheap to make by the thousand)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int

    def to(self, other: Span) -> Span:
        """The span from the start of this one to the end of `other`."""
        return Span(self.path, self.line, self.column, other.end_line, other.end_column)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}" if self.line else self.path


def whole_file(path: str) -> Span:
    """A span that names a file but no position in it (a JSON path says where instead)."""
    return Span(path, 0, 0, 0, 0)


def end_of_text(path: str, text: str) -> Span:
    """A zero-width span just after the last character that is not a line break."""
    body = text.rstrip("\r\n")
    line = body.count("\n") + 1
    column = len(body) - (body.rfind("\n") + 1) + 1
    return Span(path, line, column, line, column)
