"""Parse stage, part one: the contextual lexer, one regular-expression match per token.

Lark's own contextual lexer matches whitespace as tokens of their own and tries each
keyword as a separate terminal. This one reads the whitespace before a token in the
same match, reads every word once, and decides from the parser's current state what
the word is: the keyword, when the parser can take that keyword here; otherwise a
name, when it can take a name; otherwise the keyword again, so the parser reports
it. That is the rule of LANGUAGE.md §2 (keywords are contextual, `end` never a
name) and the same outcome as Lark's lexer on the same grammar, whose terminal
definitions it reads, so `grammars/todoflow.lark` stays the single source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from lark import Token
from lark.common import LexerConf
from lark.exceptions import UnexpectedCharacters
from lark.lexer import Lexer, LexerState

from .wording import keyword_literals

_BLANK = "[ \\t\\r\\n\\f]*"


class ContextualLexer(Lexer):
    __future_interface__ = 2

    def __init__(self, conf: LexerConf) -> None:
        terminals = conf.terminals_by_name
        self.keywords = {word: name for name, word in keyword_literals(conf.terminals).items()}
        self.punctuation = {str(t.pattern.value): t.name for t in conf.terminals if t.pattern.type == "str"}
        marks = "|".join(re.escape(p) for p in sorted(self.punctuation, key=len, reverse=True))

        def rx(name: str) -> str:
            return str(terminals[name].pattern.to_regexp())

        self.pattern = re.compile(
            f"({_BLANK})(?:({rx('COMMENT')})|({rx('BLOCK_STRING')})|({rx('STRING')})"
            f"|([a-z][a-z0-9_-]*)|({rx('INT')})|({marks}))"
        )
        self.on_comment: Callable[[Token], Any] | None = conf.callbacks.get("COMMENT")

    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[Token]:  # noqa: PLR0915
        counter = lexer_state.line_ctr
        text: str = lexer_state.text.text
        end = lexer_state.text.end
        states = parser_state.parse_conf.states
        keywords, punctuation, match = self.keywords, self.punctuation, self.pattern.match
        while counter.char_pos < end:
            found = match(text, counter.char_pos)
            if found is None or found.lastindex is None:
                self._skip_blank(counter, text, end)
                if counter.char_pos >= end:
                    return
                allowed = {n for n in states[parser_state.position] if n.isupper()}
                raise UnexpectedCharacters(  # type: ignore[no-untyped-call]
                    text, counter.char_pos, counter.line, counter.column, allowed=allowed, state=parser_state
                )
            blank_end = found.end(1)
            if blank_end > counter.char_pos:
                newlines = text.count("\n", counter.char_pos, blank_end)
                if newlines:
                    counter.line += newlines
                    counter.line_start_pos = text.rindex("\n", counter.char_pos, blank_end) + 1
                counter.char_pos = blank_end
                counter.column = blank_end - counter.line_start_pos + 1
            kind = found.lastindex
            value = found.group(kind)
            if kind == 5:  # a word: keyword or name, by what the parser can take here
                accepts = states[parser_state.position]
                keyword = keywords.get(value)
                if keyword is not None and (keyword in accepts or "ID" not in accepts or value == "end"):
                    kind_name = keyword
                else:
                    kind_name = "ID"
            elif kind == 4:
                kind_name = "STRING"
            elif kind == 7:
                kind_name = punctuation[value]
            elif kind == 6:
                kind_name = "INT"
            elif kind == 3:
                kind_name = "BLOCK_STRING"
            else:
                kind_name = "COMMENT"
            start, line, column = blank_end, counter.line, counter.column
            if kind == 3:
                _advance(counter, text, start, found.end())
            else:
                counter.char_pos = found.end()
                counter.column += len(value)
            token = Token(
                kind_name, value, start, line, column, counter.line, counter.column, counter.char_pos
            )
            if kind == 2:
                if self.on_comment is not None:
                    self.on_comment(token)
                continue
            lexer_state.last_token = token
            yield token

    @staticmethod
    def _skip_blank(counter: Any, text: str, end: int) -> None:
        position = counter.char_pos
        while position < end and text[position] in " \t\r\n\f":
            position += 1
        _advance(counter, text, counter.char_pos, position)


def _advance(counter: Any, text: str, start: int, stop: int) -> None:
    """Move the line counter over text[start:stop], which may hold line breaks."""
    newlines = text.count("\n", start, stop)
    if newlines:
        counter.line += newlines
        counter.line_start_pos = text.rindex("\n", start, stop) + 1
    counter.char_pos = stop
    counter.column = stop - counter.line_start_pos + 1
