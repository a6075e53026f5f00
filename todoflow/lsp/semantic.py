"""Semantic tokens (`textDocument/semanticTokens/full` and `/full/delta`): colours from the
parser's own tokens, so an editor with no grammar for `.todoflow` (Neovim, Helix) colours
it as the compiler reads it — a keyword only where the parser takes it as one.

The tokens are those of the scan the other features read (`outline.scan`: the grammar's
LALR parser, repairing a file that does not parse), the comments it skipped, and the role
`outline` gives each name. The legend uses LSP's standard token types, which editors
colour by default:

| token type | what |
|---|---|
| `keyword` | a keyword (`workflow`, `description`, `next`, `tasks`, `after`, ...) |
| `type` | a step kind: `regular`, `todo_task` |
| `enumMember` | a value keyword: `end`, `all`, `on`/`off` after `generic`, `learn_code`, a prompt kind |
| `namespace` | the workflow's id |
| `function` | a step id: where it is declared (`declaration`), and after `next` |
| `method` | a route id (`declaration`) |
| `variable` | a task label: where it labels a task (`declaration`), and in `after` and `on` |
| `property` | an LLM provider (`llm vertex "..."`) |
| `string` | a string or block string (a block string is one token per line) |
| `number` | a number |
| `operator` | `=>` |
| `comment` | a comment |

The one modifier is `declaration`. Positions are in the encoding agreed at initialize.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from lark import Token

from todoflow.dsl.wording import PROMPT_KINDS

from .outline import Occurrence, Role, keyword_types
from .snapshot import Snapshot

TOKEN_TYPES = (
    "keyword",
    "type",
    "enumMember",
    "namespace",
    "function",
    "method",
    "variable",
    "property",
    "string",
    "number",
    "operator",
    "comment",
)
TOKEN_MODIFIERS = ("declaration",)
_DECLARATION = 1  # the bit of `declaration`

_STEP_KINDS = frozenset({"REGULAR", "TODO_TASK"})
_VALUES = frozenset({"END", "ALL", "LEARN_CODE", "OFF"}) | PROMPT_KINDS
_NAMES: dict[Role, tuple[str, int]] = {
    "workflow": ("namespace", _DECLARATION),
    "step": ("function", _DECLARATION),
    "next": ("function", 0),
    "route": ("method", _DECLARATION),
    "label": ("variable", _DECLARATION),
    "after": ("variable", 0),
    "on": ("variable", 0),
    "provider": ("property", 0),
}
_OTHERS = {"STRING": "string", "BLOCK_STRING": "string", "INT": "number", "__ANON_0": "operator"}


@dataclass(frozen=True)
class _Piece:
    line: int  # 1-based, on the parsed text
    column: int
    end_column: int
    kind: str
    modifiers: int = 0


def tokens(snapshot: Snapshot) -> list[int]:
    """The document's semantic tokens, encoded as LSP wants them (five integers each,
    relative to the token before)."""
    data: list[int] = []
    last_line, last_start = 0, 0
    for piece in sorted(_pieces(snapshot), key=lambda p: (p.line, p.column)):
        start = snapshot.lines.position(piece.line, piece.column)
        end = snapshot.lines.position(piece.line, piece.end_column)
        if end.character <= start.character:
            continue
        delta_line = start.line - last_line
        delta_start = start.character - last_start if delta_line == 0 else start.character
        data += [delta_line, delta_start, end.character - start.character]
        data += [TOKEN_TYPES.index(piece.kind), piece.modifiers]
        last_line, last_start = start.line, start.character
    return data


def _pieces(snapshot: Snapshot) -> Iterator[_Piece]:
    names = {(n.span.line, n.span.column): n for n in snapshot.outline.names}
    keywords = keyword_types()
    previous = ""
    for token in snapshot.scan.tokens:
        if token.value:  # a repair of the scan has no text
            yield from _classified(token, previous, keywords, names)
        previous = token.type
    for comment in snapshot.scan.comments:
        yield from _lines(comment, "comment")


def _classified(
    token: Token, previous: str, keywords: dict[str, str], names: dict[tuple[int, int], Occurrence]
) -> Iterator[_Piece]:
    kind = token.type
    if kind == "ID":
        name = names.get((token.line or 0, token.column or 0))
        if name is not None:
            shown, modifiers = _NAMES[name.role]
            yield _Piece(token.line or 0, token.column or 0, token.end_column or 0, shown, modifiers)
    elif kind in keywords:
        value = kind in _VALUES or (kind == "ON" and previous == "GENERIC")
        shown = "type" if kind in _STEP_KINDS else "enumMember" if value else "keyword"
        yield _Piece(token.line or 0, token.column or 0, token.end_column or 0, shown)
    elif kind in _OTHERS:
        yield from _lines(token, _OTHERS[kind])


def _lines(token: Token, kind: str) -> Iterator[_Piece]:
    """A token one piece per line it covers (LSP clients need not take tokens that span
    lines), each from its first character that is not blank."""
    first, last = token.line or 0, token.end_line or 0
    for offset, text in enumerate(str(token).split("\n")):
        line = first + offset
        if offset and not text.strip():
            continue
        column = token.column or 0 if offset == 0 else 1  # where the line's text starts
        start = column + len(text) - len(text.lstrip()) if offset else column
        end = token.end_column or 0 if line == last else column + len(text.rstrip())
        yield _Piece(line, start, end, kind)


def delta(previous: list[int], current: list[int]) -> tuple[int, int, list[int]] | None:
    """One edit that turns `previous` into `current` (start, count deleted, data
    inserted), from their common prefix and suffix; None when they are equal."""
    if previous == current:
        return None
    start = 0
    while start < min(len(previous), len(current)) and previous[start] == current[start]:
        start += 1
    end = 0
    while end < min(len(previous), len(current)) - start and previous[-1 - end] == current[-1 - end]:
        end += 1
    return start, len(previous) - start - end, current[start : len(current) - end]
