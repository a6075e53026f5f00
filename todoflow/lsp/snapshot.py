"""One version of an open document and what the features read of it, each computed once.

Requests about the same version (a hover, then a definition, then the outline) share
one line index, one scan and one parse. A new version gets a new snapshot.
"""

from __future__ import annotations

import re
from functools import cached_property

from todoflow.dsl.parser import ParseResult, normalize, try_parse

from .outline import Outline, Scan, outline, scan
from .positions import LineIndex


class Snapshot:
    def __init__(self, uri: str, path: str, version: int | None, source: str, encoding: str) -> None:
        self.uri = uri
        self.path = path  # the name diagnostics and spans carry: the file's path, or the URI
        self.version = version
        self.source = source  # as the editor holds it
        self.encoding = encoding

    @cached_property
    def text(self) -> str:
        """The text as the parser reads it (spans are measured on it)."""
        return normalize(self.source)

    @cached_property
    def lines(self) -> LineIndex:
        return LineIndex(self.source, self.encoding)

    @cached_property
    def scan(self) -> Scan:
        return scan(self.text)

    @cached_property
    def outline(self) -> Outline:
        return outline(self.scan, self.path)

    @cached_property
    def parsed(self) -> ParseResult:
        return try_parse(self.text, self.path)

    @cached_property
    def line_starts(self) -> list[int]:
        return [0, *(m.end() for m in re.finditer("\n", self.text))]

    def offset(self, point: tuple[int, int]) -> int:
        """The offset in `text` of a 1-based (line, column)."""
        line, column = point
        start = self.line_starts[min(line, len(self.line_starts)) - 1]
        return min(start + column - 1, len(self.text))
