"""Positions both ways between todoflow spans and LSP ranges.

A todoflow span is 1-based, counts code points, and is measured on the text as the
parser reads it (a byte-order mark dropped, CRLF read as LF). An LSP position is
0-based and counts code units of the encoding agreed at initialize: UTF-16 unless the
client offers another. A tab is one code point and one code unit, so tabs need no
special case; a character outside the Basic Multilingual Plane (an emoji) is one code
point but two UTF-16 units. Imports only lsprotocol's types.
"""

from __future__ import annotations

from lsprotocol import types

from todoflow.dsl.spans import Span

_BOM = "\ufeff"


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


class LineIndex:
    """The lines of one version of a document, to convert positions in both directions."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.bom = 1 if text.startswith(_BOM) else 0
        self.lines = [line.removesuffix("\r") for line in text.split("\n")]
        self.encoding = encoding

    def position(self, line: int, column: int) -> types.Position:
        """The LSP position of a 1-based `line`:`column` of the parsed text."""
        if line < 1:
            return types.Position(0, 0)
        if line > len(self.lines):
            last = len(self.lines) - 1
            return types.Position(last, _units(self.lines[last], self.encoding))
        text = self.lines[line - 1]
        index = min(max(column - 1, 0) + (self.bom if line == 1 else 0), len(text))
        return types.Position(line - 1, _units(text[:index], self.encoding))

    def range(self, span: Span) -> types.Range:
        return types.Range(
            self.position(span.line, span.column), self.position(span.end_line, span.end_column)
        )

    def point(self, position: types.Position) -> tuple[int, int]:
        """The 1-based line and column of the parsed text at an LSP position."""
        if position.line >= len(self.lines):
            return len(self.lines), len(self.lines[-1]) + 1 - (self.bom if len(self.lines) == 1 else 0)
        text = self.lines[position.line]
        index, units = 0, 0
        while index < len(text) and units < position.character:
            units += _units(text[index], self.encoding)
            index += 1
        if position.line == 0:
            index = max(index - self.bom, 0)
        return position.line + 1, index + 1

    def end(self) -> types.Position:
        """The position just after the last character of the document."""
        last = len(self.lines) - 1
        return types.Position(last, _units(self.lines[last], self.encoding))


def contains(span: Span, point: tuple[int, int]) -> bool:
    """Whether a 1-based (line, column) lies in the span, its end included (a cursor
    just after a word is on that word)."""
    return (span.line, span.column) <= point <= (span.end_line, span.end_column)
