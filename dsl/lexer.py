"""Parse stage, part one: the contextual lexer, one regular-expression match per token.

Lark's own contextual lexer matches whitespace as tokens of their own and tries each
keyword as a separate terminal. This one reads the whitespace before a token in the
same match, reads every word once, and decides from the parser's current state what
the word is: the keyword, when the parser can take that keyword here; otherwise a
name, when it can take a name; otherwise the keyword again, so the parser reports
it. That is the rule of LANGUAGE.md §2 (keywords are contextual, `end` never a
name) and the same outcome as Lark's lexer on the same grammar, whose terminal
definitions it reads (`Lexicon`), so `grammars/todoflow.lark` stays the single source.

It imports nothing of Lark: the fast parse (`dsl.lalr`) runs it with tables made
ahead of time, and `dsl.grammar` wraps it as a Lark lexer for the error-mode parse.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterator
from typing import Any, NamedTuple, Protocol, TypeVar

_BLANK = "[ \\t\\r\\n\\f]*"
T = TypeVar("T")


class Lexicon(NamedTuple):
    """The grammar's terminals as the lexer reads them: keyword words and punctuation
    marks to their terminal names, and the regular expressions of the other terminals."""

    keywords: dict[str, str]
    punctuation: dict[str, str]
    patterns: dict[str, str]  # COMMENT, BLOCK_STRING, STRING, INT


class Token(str):
    """A token of the fast parse: its text, terminal name and where it stands (1-based
    lines and columns, 0-based offsets), read by the builder as it reads Lark's."""

    type: str
    start_pos: int
    line: int
    column: int
    end_line: int
    end_column: int
    end_pos: int

    def __new__(
        cls,
        type: str,
        value: str,
        start_pos: int,
        line: int,
        column: int,
        end_line: int,
        end_column: int,
        end_pos: int,
    ) -> Token:
        token = super().__new__(cls, value)
        token.type, token.start_pos, token.end_pos = type, start_pos, end_pos
        token.line, token.column, token.end_line, token.end_column = line, column, end_line, end_column
        return token


class Counter(Protocol):
    """Where the lexer stands: Lark's line counter, or `Cursor`."""

    char_pos: int
    line: int
    line_start_pos: int
    column: int


class Cursor:
    __slots__ = ("char_pos", "column", "line", "line_start_pos")

    def __init__(self) -> None:
        self.char_pos, self.line, self.line_start_pos, self.column = 0, 1, 0, 1


class Unlexable(Exception):
    """No token starts at the counter's position."""


class Scanner:
    """The lexer of one lexicon; `tokens` reads a text, `accepts` telling it at each
    word what the parser can take there."""

    def __init__(self, lexicon: Lexicon) -> None:
        self.keywords, self.punctuation = lexicon.keywords, lexicon.punctuation
        marks = "|".join(re.escape(p) for p in sorted(self.punctuation, key=len, reverse=True))
        rx = lexicon.patterns
        self.pattern = re.compile(
            f"({_BLANK})(?:({rx['COMMENT']})|({rx['BLOCK_STRING']})|({rx['STRING']})"
            f"|([a-z][a-z0-9_-]*)|({rx['INT']})|({marks}))"
        )

    def tokens(
        self,
        text: str,
        counter: Counter,
        accepts: Callable[[], Container[str]],
        make: Callable[..., T],
        on_comment: Callable[[T], Any] | None,
        end: int | None = None,
    ) -> Iterator[T]:
        """The tokens from the counter's position; `make` builds each (our `Token` or
        Lark's, same arguments); comments go to `on_comment`. Raises `Unlexable`."""
        end = len(text) if end is None else end
        keywords, punctuation, match = self.keywords, self.punctuation, self.pattern.match
        while counter.char_pos < end:
            found = match(text, counter.char_pos)
            if found is None or found.lastindex is None:
                _skip_blank(counter, text, end)
                if counter.char_pos >= end:
                    return
                raise Unlexable
            blank_end = found.end(1)
            if blank_end > counter.char_pos:
                _advance(counter, text, counter.char_pos, blank_end)
            kind = found.lastindex
            value = found.group(kind)
            if kind == 5:  # a word: keyword or name, by what the parser can take here
                keyword = keywords.get(value)
                if keyword is not None:
                    taken = accepts()
                    kind_name = keyword if keyword in taken or "ID" not in taken or value == "end" else "ID"
                else:
                    kind_name = "ID"
            else:
                kind_name = _KINDS[kind] if kind != 7 else punctuation[value]
            start, line, column = blank_end, counter.line, counter.column
            if kind == 3:
                _advance(counter, text, start, found.end())
            else:
                counter.char_pos = found.end()
                counter.column += len(value)
            token = make(
                kind_name, value, start, line, column, counter.line, counter.column, counter.char_pos
            )
            if kind == 2:
                if on_comment is not None:
                    on_comment(token)
                continue
            yield token


_KINDS = {2: "COMMENT", 3: "BLOCK_STRING", 4: "STRING", 6: "INT"}


def _skip_blank(counter: Counter, text: str, end: int) -> None:
    position = counter.char_pos
    while position < end and text[position] in " \t\r\n\f":
        position += 1
    _advance(counter, text, counter.char_pos, position)


def _advance(counter: Counter, text: str, start: int, stop: int) -> None:
    """Move the line counter over text[start:stop], which may hold line breaks."""
    newlines = text.count("\n", start, stop)
    if newlines:
        counter.line += newlines
        counter.line_start_pos = text.rindex("\n", start, stop) + 1
    counter.char_pos = stop
    counter.column = stop - counter.line_start_pos + 1
