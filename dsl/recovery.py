"""Parse stage, error mode: report every independent syntax error in one pass.

Runs only after the fast parse has failed. It drives Lark's interactive LALR parser
one token at a time and, at each error, reports it in words and repairs the input
the way an author most likely meant: a misspelt keyword is read as that keyword, a
missing `}` is closed when the layout says the block has ended, one missing token
(`=>`, `,`, a string, a name) is inserted when that lets the parse go on, and
otherwise the token is dropped (a whole `{...}` block at once). Errors are muted
until the parser has accepted a few tokens again, so one mistake gives one report.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedToken
from lark.lexer import Token
from lark.parsers.lalr_interactive_parser import InteractiveParser
from lark.parsers.lalr_parser_state import ParserState

from .diagnostics import Diagnostic
from .nodes import node
from .spans import Span, end_of_text
from .wording import (
    FORMS,
    ITEMS,
    STEP_KINDS,
    describe_expected,
    describe_found,
    missing_slot,
    suggest_keyword,
    terminal_literals,
)

MAX_ERRORS = 50
_SETTLE = 2  # tokens the parser must accept after an error before it reports another
_MAX_DROPPED = 1000  # tokens dropped in a row before the input is taken for noise
_END = frozenset({"$END", "<END-OF-FILE>"})
_OPENERS = frozenset({"WORKFLOW", "REGULAR", "TODO_TASK", "ROUTE", "TASKS"})
_PLACEHOLDERS = {"STRING": '""', "ID": "x", "INT": "1", "BLOCK_STRING": '""""""'}
_INSERTABLE = ("=>", ",", ":", "STRING", "ID", "INT", "{")
_WORD = re.compile(r"[A-Za-z0-9_-]+")
_NOISE = re.compile(r'[^\sA-Za-z0-9_"{}#,:=>-]+')
_BLOCK_SCAN = re.compile(r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*(?:"""|$)|"(?:[^"\\\n]|\\.)*"?|#[^\n]*|\{+|\}+')
_UNCLOSED_STRING_HELP = (
    'close it with `"` on the same line, or write text over several lines as a block string `"""..."""`'
)
_ID_HELP = "a name is lowercase letters, digits, `_` and `-`, and starts with a letter"
_MAX_HEAD = 48  # characters of an incomplete construct quoted in a message


@node
class _Opener:
    span: Span
    indent: int
    label: str


class Recovery:
    def __init__(self, parser: lark.Lark, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.literals = terminal_literals(parser)
        self.names = {value: name for name, value in self.literals.items()}
        self.ip: InteractiveParser = parser.parse_interactive(text)
        self.diagnostics: list[Diagnostic] = []
        self.openers: list[_Opener] = []
        self.settled = _SETTLE
        self.dropped = 0

    def literal(self, name: str) -> str | None:
        return self.literals.get(name)

    def run(self) -> list[Diagnostic]:
        tokens = self._lex()
        while len(self.diagnostics) < MAX_ERRORS and self.dropped < _MAX_DROPPED:
            try:
                token = next(tokens)
            except StopIteration:
                self._finish()
                return self.diagnostics
            except UnexpectedToken as e:  # the lexer met a token this state cannot take
                self._bad_token(e.token, set(e.expected))
                tokens = self._lex()
                continue
            except UnexpectedCharacters as e:
                self._bad_characters(e.pos_in_stream or 0, set(e.allowed))
                tokens = self._lex()
                continue
            expected = self._feed(token)
            if expected is not None:
                self._bad_token(token, expected)
                tokens = self._lex()
        if len(self.diagnostics) >= MAX_ERRORS:
            last = self.diagnostics[-1].span
            self.diagnostics.append(
                Diagnostic("E0009", "note", f"stopped after {MAX_ERRORS} syntax errors", last)
            )
        return self.diagnostics

    # -- driving the parser ----------------------------------------------------

    def _lex(self) -> Iterator[Token]:
        lex: Callable[[ParserState[Token]], Iterator[Token]] = self.ip.lexer_thread.lex
        return lex(self.ip.parser_state)

    def _feed(self, token: Token) -> set[str] | None:
        """Feed one token; None on success, else the set of terminals expected."""
        try:
            self.ip.feed_token(token)
        except UnexpectedToken as e:
            return set(e.expected)
        self._track(token)
        self.settled += 1
        self.dropped = 0
        return None

    def _accepts(self, tokens: list[Token]) -> bool:
        copy: Callable[..., InteractiveParser] = self.ip.copy
        trial = copy(deepcopy_values=False)
        try:
            for token in tokens:
                trial.feed_token(token)
        except UnexpectedToken:
            return False
        return True

    def _skip(self, end: int) -> None:
        state = self.ip.lexer_thread.state
        assert state is not None
        start = state.line_ctr.char_pos
        if end > start:
            state.line_ctr.feed(self.text[start:end])

    def _track(self, token: Token) -> None:
        if token.type == "LBRACE":
            self.openers.append(_Opener(self._span(token), self._indent(token), self._label()))
        elif token.type == "RBRACE" and self.openers:
            self.openers.pop()

    def _label(self) -> str:
        values = self.ip.parser_state.value_stack
        for index in range(len(values) - 2, -1, -1):
            value = values[index]
            if isinstance(value, Token) and value.type in _OPENERS:
                if value.type == "TASKS":
                    return "the `tasks` block"
                following = values[index + 1] if index + 1 < len(values) else None
                name = f" `{following}`" if isinstance(following, Token) and following.type == "ID" else ""
                kind = {"WORKFLOW": "workflow", "ROUTE": "route"}.get(value.type, "step")
                return f"{kind}{name}"
        return "the block"

    def _indent(self, token: Token) -> int:
        """The column of the first token on the token's line."""
        start = self.text.rfind("\n", 0, token.start_pos or 0) + 1
        end = self.text.find("\n", start)
        line = self.text[start : end if end >= 0 else len(self.text)]
        return len(line) - len(line.lstrip(" \t")) + 1

    # -- repairs ---------------------------------------------------------------

    def _bad_token(self, token: Token, expected: set[str]) -> None:
        report = self.settled >= _SETTLE
        self.settled = 0
        if self._close_by_layout(token, report):
            return
        if report:
            self._report(token, expected)
        if self._repair(token, expected):
            return
        self.dropped += 1
        if token.type == "LBRACE":
            self._skip(self._block_end(token.end_pos or 0))

    def _close_by_layout(self, token: Token, report: bool) -> bool:
        """Close the blocks that the token's column says have ended, if that lets it in."""
        closers = self._closers_by_layout(token)
        if not closers or not self._accepts([*closers, token]):
            return False
        if report:
            opener = self.openers[-1]
            self._unclosed(opener, f"add `}}` before line {token.line} to close {opener.label}")
        for closer in closers:
            self._feed(closer)
        self._feed(token)
        return True

    def _repair(self, token: Token, expected: set[str]) -> bool:
        keyword = suggest_keyword(str(token), expected, self.literal) if _WORD.fullmatch(token) else None
        if keyword is not None:
            replacement = Token.new_borrow_pos(self.names[keyword], keyword, token)
            if self._accepts([replacement]):
                self._feed(replacement)
                return True
        # a `}` anchors the structure: anything that lets it close its block may go before it
        candidates = (
            sorted(expected) if token.type == "RBRACE" else [self.names.get(t, t) for t in _INSERTABLE]
        )
        for name in candidates:
            if name not in expected or name == "$END":
                continue
            inserted = Token.new_borrow_pos(name, _PLACEHOLDERS.get(name, self.literals.get(name, "")), token)
            if self._accepts([inserted, token]):
                self._feed(inserted)
                self._feed(token)
                return True
        return False

    def _closers_by_layout(self, token: Token) -> list[Token]:
        """`}` for every open block the token's column says has ended."""
        if token.type == "$END" or not self._starts_line(token):
            return []
        column = token.column or 1
        # a `}` closes its own block; only blocks indented deeper are missing theirs
        deeper = column + 1 if token.type == "RBRACE" else column
        count = sum(1 for opener in self.openers if deeper <= opener.indent)
        return [Token.new_borrow_pos("RBRACE", "}", token) for _ in range(count)]

    def _starts_line(self, token: Token) -> bool:
        start = self.text.rfind("\n", 0, token.start_pos or 0) + 1
        return not self.text[start : token.start_pos].strip()

    def _block_end(self, position: int) -> int:
        """The position just after the `}` that closes a `{` ending at `position`."""
        depth = 1
        for match in _BLOCK_SCAN.finditer(self.text, position):
            run = match.group(0)
            if run[0] == "{":
                depth += len(run)
            elif run[0] == "}":
                if len(run) >= depth:
                    return match.start() + depth
                depth -= len(run)
        return len(self.text)

    def _bad_characters(self, position: int, allowed: set[str]) -> None:
        text = self.text
        word = _WORD.match(text, position)
        if word is not None:
            token = Token(
                "ID",
                word.group(0),
                position,
                *self._line_column(position),
                *self._line_column(word.end()),
                end_pos=word.end(),
            )
            self._skip(word.end())
            if "ID" in allowed and token[0].isalpha():
                if self.settled >= _SETTLE:
                    self._add("E0005", f"`{token}` is not a valid name", self._span(token), _ID_HELP)
                self.settled = 0
                self._feed(Token.new_borrow_pos("ID", token.lower(), token))
                return
            self._bad_token(token, allowed)
            return
        if text.startswith('"""', position):
            end = len(text)
            self._report_once(
                "E0004", "this block string is never closed", position, position + 3, 'close it with `"""`'
            )
        elif text[position] == '"':
            end = text.find("\n", position)
            end = len(text) if end < 0 else end
            self._report_once(
                "E0003",
                "this string is never closed on its line",
                position,
                end,
                _UNCLOSED_STRING_HELP,
            )
        else:
            noise = _NOISE.match(text, position)
            end = noise.end() if noise else position + 1
            self._report_once(
                "E0005",
                f"unexpected character {_show_char(text[position])}",
                position,
                position + 1,
                "remove it",
            )
        self._skip(end)
        self.dropped += 1

    def _report_once(self, code: str, message: str, start: int, end: int, help: str) -> None:
        if self.settled >= _SETTLE:
            span = Span(self.path, *self._line_column(start), *self._line_column(end))
            self._add(code, message, span, help)
        self.settled = 0

    def _finish(self) -> None:
        span = end_of_text(self.path, self.text)
        eof = Token(
            "$END", "", len(self.text), span.line, span.column, span.line, span.column, len(self.text)
        )
        try:
            self.ip.feed_token(eof)
        except UnexpectedToken as e:
            if self.settled >= _SETTLE:
                self._report(eof, set(e.expected))

    # -- wording ---------------------------------------------------------------

    def _report(self, token: Token, expected: set[str]) -> None:
        if token.type == "$END" and self.openers and "RBRACE" in expected:
            opener = self.openers[-1]
            self._unclosed(opener, f"add `}}` to close {opener.label}")
            return
        found = describe_found(token.type, str(token), self.literal)
        help: str | None
        span = end_of_text(self.path, self.text) if token.type == "$END" else self._span(token)
        incomplete = self._incomplete(token, expected)
        if expected <= _END:
            message = f"expected end of file after the workflow's closing `}}`, found {found}"
            help = "a file holds one workflow; remove what follows its closing `}`"
        elif incomplete is not None:
            what, usage, span = incomplete
            message = f"expected {what}, found {found}"
            help = self._found_help(token, expected) or usage
        else:
            message = f"expected {describe_expected(expected, self.literal)}, found {found}"
            help = self._help(token, expected)
        self._add("E0001", message, span, help)

    def _incomplete(self, token: Token, expected: set[str]) -> tuple[str, str, Span] | None:
        """When `token` interrupts a keyword's arguments: what is missing (with what was
        written), the keyword's usage, and where to point (at what was written, when the
        token that cut it short stands on a later line)."""
        opened = self._open_construct()
        if opened is None:
            return None
        keyword, parts = opened
        form = FORMS[keyword.type]
        slot = missing_slot(form, [p.type if isinstance(p, Token) else "" for p in parts], expected)
        if slot is None:
            return None
        written = [keyword, *(t for p in parts for t in _tokens(p))]
        usage = slot.help or f"`{keyword}` takes {form.usage}: `{form.example}`"
        if any(not isinstance(p, Token | lark.Tree) for p in parts):  # a step inside a route
            return f"{slot.phrase} to close `{keyword} {written[1]}`", usage, self._span(token)
        last = written[-1]
        head = " ".join(self.text[keyword.start_pos : last.end_pos].split())
        if len(head) > _MAX_HEAD:
            head = head[: _MAX_HEAD - 1].rstrip() + "…"
        span = self._span(token)
        cut_short = token.type != "$END" and (last.end_line or 0) < (token.line or 0)
        if cut_short and keyword.line == last.end_line:  # point at what the next line cut short
            span = self._span(keyword).to(self._span(last))
        return f"{slot.phrase} after `{head}`", usage, span

    def _open_construct(self) -> tuple[Token, list[object]] | None:
        """The innermost keyword on the parser's stack that takes arguments, and what
        follows it there (tokens, and nodes built from nested constructs)."""
        values = self.ip.parser_state.value_stack
        for index in range(len(values) - 1, -1, -1):
            value = values[index]
            if isinstance(value, Token) and value.type in FORMS:
                return value, list(values[index + 1 :])
        return None

    def _found_help(self, token: Token, expected: set[str]) -> str | None:
        """Help about the token itself: a misspelt keyword, `end` where a name belongs."""
        if _WORD.fullmatch(token):
            keyword = suggest_keyword(str(token), expected, self.literal)
            if keyword is not None:
                return f"did you mean `{keyword}`?"
        if "ID" in expected and token.type == "END":
            return "`end` always means the end of the workflow; it cannot be used as a name"
        return None

    def _help(self, token: Token, expected: set[str]) -> str | None:
        found = self._found_help(token, expected)
        if found is not None:
            return found
        if token.type in STEP_KINDS and ITEMS & expected:
            return 'a step inside a step is written in a route: `route ID "Name" when "..." { ... }`'
        if "COMMA" in expected and token.type == "STRING":
            return "separate the strings with `,`"
        if self.names.get("=>") in expected:
            return 'a task is written `"action" => "expected result"`'
        if expected == {"WORKFLOW"}:
            return 'a file holds one workflow: `workflow my-flow "Title" { ... }`'
        return None

    def _unclosed(self, opener: _Opener, help: str) -> None:
        where = f"{opener.span.line}:{opener.span.column}"
        self._add("E0002", f"this `{{` opened at {where} is never closed", opener.span, help)

    def _add(self, code: str, message: str, span: Span, help: str | None) -> None:
        self.diagnostics.append(Diagnostic(code, "error", message, span, help))

    def _span(self, token: Token) -> Span:
        return Span(self.path, token.line or 1, token.column or 1, token.end_line or 1, token.end_column or 1)

    def _line_column(self, position: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, position) + 1
        return line, position - (self.text.rfind("\n", 0, position) + 1) + 1


def _tokens(value: object) -> list[Token]:
    """The tokens of a value on the parser's stack (an inlined rule's are in a tree)."""
    if isinstance(value, Token):
        return [value]
    if isinstance(value, lark.Tree):
        return [t for child in value.children for t in _tokens(child)]
    return []


def _show_char(char: str) -> str:
    if char.isprintable():
        return f"`{char}`"
    return f"`\\u{ord(char):04x}`"
