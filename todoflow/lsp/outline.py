"""What an editor needs to know of a document's structure, even while it does not parse.

An author's file is broken most of the time they are typing in it, and navigation,
rename, completion, the outline and folding must keep working. `scan` drives the
grammar's own LALR parser (through the project's contextual lexer, so a word is a
keyword or a name exactly as the compiler reads it) one token at a time. At a token it
cannot take, it repairs the input the way an author most likely meant: it closes the
blocks still open when that lets the token in (a forgotten `}`), and before a `}` it
finishes the construct in progress with placeholder tokens (a task cut short before its
`=> "..."`); otherwise it drops the token. `outline` turns the tokens it accepted into
the names written in the file, each with its role, and the blocks that nest them. For a
file that parses, the tokens are exactly the parser's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from typing import Literal, NamedTuple, TypeAlias

import lark
from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedToken
from lark.parsers.lalr_interactive_parser import InteractiveParser

from todoflow.dsl.builder import Builder
from todoflow.dsl.grammar import load_parser
from todoflow.dsl.nodes import node
from todoflow.dsl.spans import Span
from todoflow.dsl.wording import keyword_literals

Role: TypeAlias = Literal["workflow", "step", "next", "route", "label", "after", "on", "provider"]
BlockKind: TypeAlias = Literal["workflow", "step", "route", "tasks", "task"]

_ROLE_AFTER: dict[str, Role] = {
    "WORKFLOW": "workflow",
    "REGULAR": "step",
    "TODO_TASK": "step",
    "NEXT": "next",
    "ROUTE": "route",
    "LLM": "provider",
    "CONDITIONAL_LLM": "provider",
    "AFTER": "after",
    "ON": "on",
}
_HEADERS: dict[str, BlockKind] = {
    "WORKFLOW": "workflow",
    "REGULAR": "step",
    "TODO_TASK": "step",
    "ROUTE": "route",
    "TASKS": "tasks",
}
_TEXTS = frozenset({"STRING", "BLOCK_STRING"})
_ARROW = "__ANON_0"  # Lark's name for the `=>` terminal
_PLACEHOLDERS = (_ARROW, "STRING", "ID", "INT")  # what may stand in for a missing piece
_MAX_PLACEHOLDERS = 4


@node
class Occurrence:
    """A name as written: its role, and the `tasks` block it belongs to (labels are
    unique only within one block; -1 outside any)."""

    role: Role
    value: str
    span: Span
    scope: int = -1
    nested: bool = False  # a step written inside a route (a sub-agent)
    target: str | None = None  # for a route: the id of the step behind it


@node
class Block:
    """A construct with a body, for the outline and folding."""

    kind: BlockKind
    name: str
    detail: str
    span: Span
    selection: Span
    children: tuple[Block, ...] = field(default=())


class Outline(NamedTuple):
    names: tuple[Occurrence, ...]
    blocks: tuple[Block, ...]
    multiline_texts: tuple[Span, ...]  # block strings over several lines, to fold


class Scan(NamedTuple):
    tokens: list[Token]  # the tokens the parser took, in order; repairs have no text
    parser: InteractiveParser  # its state after the last token read
    comments: tuple[Token, ...] = ()  # the comments read, in order (for semantic tokens)


_BUILDER = Builder()
_COMMENTS: list[Token] = []  # the parser hands comments to a list; the scan needs none
_PARSER: list[lark.Lark] = []
_KEYWORDS: dict[str, str] = {}


def _parser() -> lark.Lark:
    if not _PARSER:
        _PARSER.append(load_parser(_BUILDER, _COMMENTS))
    return _PARSER[0]


def keyword_types() -> dict[str, str]:
    """Keyword terminal name -> its word, from the grammar."""
    if not _KEYWORDS:
        _KEYWORDS.update(keyword_literals(_parser().terminals))
    return _KEYWORDS


def scan(text: str, stop: int | None = None) -> Scan:
    """Read `text` as the parser would, never failing; with `stop`, only the tokens
    that start before that offset (the state at a cursor)."""
    parser = _parser()
    _BUILDER.reset("<scan>")
    _COMMENTS.clear()
    ip = parser.parse_interactive(text)
    taken: list[Token] = []
    tokens = _lex(ip)
    while True:
        try:
            token = next(tokens)
        except StopIteration:
            break
        except UnexpectedCharacters as error:
            _skip_characters(ip, text, error.pos_in_stream or 0)
            tokens = _lex(ip)
            continue
        if stop is not None and (token.start_pos or 0) >= stop:
            break
        if _take(ip, token, taken):
            taken.append(token)
    comments = tuple(_COMMENTS)
    _COMMENTS.clear()
    return Scan(taken, ip, comments)


def _lex(ip: InteractiveParser) -> Iterator[Token]:
    return ip.lexer_thread.lex(ip.parser_state)  # type: ignore[no-untyped-call,no-any-return]


def _take(ip: InteractiveParser, token: Token, taken: list[Token]) -> bool:
    """Feed a token, repairing the input first if that lets it in: close the blocks
    still open (a forgotten `}`), or, for a `}`, finish the construct it cuts short
    (a task without its `=> "..."`). Repairs are tokens with no text."""
    if token.type in ip.choices():  # type: ignore[no-untyped-call]
        try:  # a token the state has an action for is nearly always taken: feed it without a trial
            ip.feed_token(token)
            return True
        except UnexpectedToken:
            pass
    depth = sum(1 if t.type == "LBRACE" else -1 if t.type == "RBRACE" else 0 for t in taken)
    repairs = [[_placeholder("RBRACE", token)] * count for count in range(1, depth + 1)]
    if token.type == "RBRACE":
        repairs = [_completion(ip, token), *repairs]
    for repair in repairs:
        if repair and _fits(ip, [*repair, token]):
            for each in [*repair, token]:
                ip.feed_token(each)
            taken += repair
            return True
    return False


def _fits(ip: InteractiveParser, tokens: list[Token]) -> bool:
    trial = ip.copy(deepcopy_values=False)  # type: ignore[no-untyped-call]
    try:
        for token in tokens:
            trial.feed_token(token)
    except UnexpectedToken:
        return False
    return True


def _completion(ip: InteractiveParser, closing: Token) -> list[Token]:
    """Placeholders that finish the construct in progress so that `closing` fits."""
    trial = ip.copy(deepcopy_values=False)  # type: ignore[no-untyped-call]
    added: list[Token] = []
    while len(added) < _MAX_PLACEHOLDERS and not _fits(trial, [closing]):
        accepted = trial.accepts()
        choice = next((t for t in _PLACEHOLDERS if t in accepted), None)
        if choice is None:
            return []
        added.append(_placeholder(choice, closing))
        trial.feed_token(added[-1])
    return added


# what a placeholder holds: a value the AST builder's callbacks accept (`int("")` does not)
_VALUES = {"INT": "0", "STRING": '""'}


def _placeholder(kind: str, where: Token) -> Token:
    return Token.new_borrow_pos(kind, _VALUES.get(kind, ""), where)


def _skip_characters(ip: InteractiveParser, text: str, position: int) -> None:
    """Step over what no token matches: an unclosed string to its line's end, else one character."""
    if text.startswith('"""', position):
        end = len(text)
    elif text.startswith('"', position):
        newline = text.find("\n", position)
        end = len(text) if newline < 0 else newline
    else:
        end = position + 1
    state = ip.lexer_thread.state
    assert state is not None
    state.line_ctr.feed(text[state.line_ctr.char_pos : end])


def span_of(token: Token, path: str) -> Span:
    return Span(path, token.line or 1, token.column or 1, token.end_line or 1, token.end_column or 1)


def outline(found: Scan, path: str) -> Outline:
    """The names and blocks of a scanned document."""
    return _Reader(found.tokens, path).read()


class _Reader:
    def __init__(self, tokens: list[Token], path: str) -> None:
        self.tokens = tokens
        self.path = path
        self.names: list[Occurrence] = []
        self.open: list[tuple[BlockKind, int, list[Block]]] = []  # kind, index of the header
        self.roots: list[Block] = []
        self.headers: list[tuple[BlockKind, int]] = []
        self.texts: list[Span] = []
        self.scope = -1
        self.route: int | None = None  # the route whose step comes next, by index in names

    def read(self) -> Outline:
        tokens = self.tokens
        listing: Role | None = None
        last = tokens[0] if tokens else None  # the last token written in the file
        for index, token in enumerate(tokens):
            kind = token.type
            if not token.value:  # a repair of the scan: a closer ends its block at the last real token
                if kind == "RBRACE" and last is not None:
                    self._close(last)
                continue
            last = token
            before = tokens[index - 1].type if index else ""
            if kind == "ID":
                role = _ROLE_AFTER.get(before) or (listing if before == "COMMA" else None)
                if role is None and index + 1 < len(tokens) and tokens[index + 1].type == "COLON":
                    role = "label"
                if role is not None:
                    self._name(role, token)
            listing = kind_of_list(kind, listing)
            if kind in _HEADERS:
                self.headers.append((_HEADERS[kind], index))
            elif kind == "LBRACE":
                self._open(index)
            elif kind == "RBRACE":
                self._close(token)
            elif kind == _ARROW and self.open and self.open[-1][0] == "tasks":
                self._task(index)
            elif kind == "BLOCK_STRING" and token.end_line != token.line:
                self.texts.append(span_of(token, self.path))
        while self.open and last is not None:
            self._close(last)
        return Outline(tuple(self.names), tuple(self.roots), tuple(self.texts))

    def _name(self, role: Role, token: Token) -> None:
        in_tasks = bool(self.open) and self.open[-1][0] == "tasks"
        scope = self.scope if in_tasks and role in ("label", "after", "on") else -1
        nested = role == "step" and any(kind == "route" for kind, _, _ in self.open)
        occurrence = Occurrence(role, str(token), span_of(token, self.path), scope, nested)
        if role == "step" and self.route is not None:
            route = self.names[self.route]
            self.names[self.route] = Occurrence("route", route.value, route.span, target=occurrence.value)
            self.route = None
        if role == "route":
            self.route = len(self.names)
        self.names.append(occurrence)

    def _open(self, index: int) -> None:
        kind, header = self.headers.pop() if self.headers else ("tasks", index)
        if kind == "tasks":
            self.scope += 1
        self.open.append((kind, header, []))

    def _close(self, closing: Token) -> None:
        if not self.open:
            return
        kind, header, children = self.open.pop()
        following = self.tokens[header + 1 : header + 3]
        named = kind != "tasks" and bool(following) and following[0].type == "ID" and bool(following[0].value)
        title = next((t for t in following if t.type in _TEXTS), None)
        selection = span_of(following[0] if named else self.tokens[header], self.path)
        span = span_of(self.tokens[header], self.path).to(span_of(closing, self.path))
        name = str(following[0]) if named else kind
        block = Block(kind, name, _shown(title), span, selection, tuple(children))
        (self.open[-1][2] if self.open else self.roots).append(block)

    def _task(self, arrow: int) -> None:
        tokens = self.tokens
        action = tokens[arrow - 1]
        labelled = arrow >= 3 and tokens[arrow - 2].type == "COLON" and tokens[arrow - 3].type == "ID"
        first = tokens[arrow - 3] if labelled else action
        last = arrow + 1 if arrow + 1 < len(tokens) else arrow
        while last + 1 < len(tokens) and tokens[last + 1].type in ("AFTER", "COMMA", "ID"):
            if tokens[last + 1].type == "ID" and last + 2 < len(tokens) and tokens[last + 2].type == "COLON":
                break  # the label of the next task
            last += 1
        name = str(first) if labelled else _shown(action)
        span = span_of(first, self.path).to(span_of(tokens[last], self.path))
        block = Block("task", name, _shown(action) if labelled else "", span, span_of(first, self.path))
        self.open[-1][2].append(block)


def kind_of_list(kind: str, listing: Role | None) -> Role | None:
    """Whether the next name after a `,` continues an `after` or `on` list."""
    if kind in ("AFTER", "ON"):
        return "after" if kind == "AFTER" else "on"
    return listing if kind in ("COMMA", "ID") else None


def _shown(token: Token | None) -> str:
    """A string token as a one-line label for the outline."""
    if token is None:
        return ""
    text = str(token).strip('"').strip()
    first = text.split("\n", 1)[0].strip()
    return first if len(first) <= 60 else first[:59] + "…"
