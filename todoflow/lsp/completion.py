"""Completion: what may be written at the cursor, as the parser sees it there.

The text before the cursor is scanned with the grammar's parser; the terminals its
state accepts are the keywords offered (prompt kinds among them). Where it accepts a
name, the name depends on what came before: step ids after `next`, the labels of the
same `tasks` block after `after` or a constraint's `on` (and after a `,` in such a
list) but the task's own label and the labels already in the list, and after
`llm`/`conditional_llm` the providers already used in the file. Inside a string or a
comment nothing is offered.
"""

from __future__ import annotations

import re

from lark import Token
from lsprotocol import types

from todoflow.dsl.wording import PROMPT_KINDS

from . import keywords
from .outline import Occurrence, keyword_types, kind_of_list, outline, scan
from .snapshot import Snapshot

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_LINE_PIECES = re.compile(r'"""|"(?:[^"\\]|\\.)*"|#|"')


def complete(snapshot: Snapshot, point: tuple[int, int]) -> list[types.CompletionItem]:
    text = snapshot.text
    offset = snapshot.offset(point)
    start = offset
    while start > 0 and text[start - 1] in _WORD_CHARS:
        start -= 1
    if _in_string_or_comment(text, start):
        return []
    found = scan(text, stop=start)
    if found.tokens and (found.tokens[-1].end_pos or 0) > start:
        return []  # inside a block string
    accepted = found.parser.accepts()  # type: ignore[no-untyped-call]
    line, column = point
    replace = types.Range(
        snapshot.lines.position(line, column - (offset - start)), snapshot.lines.position(line, column)
    )
    items = [
        _keyword(name, word, replace) for name, word in sorted(keyword_types().items()) if name in accepted
    ]
    if "ID" in accepted:
        items += [_name(n, replace) for n in _names(snapshot, found.tokens, offset)]
    return items


def _in_string_or_comment(text: str, offset: int) -> bool:
    """Whether `offset` is inside a one-line string or a comment, by its line alone."""
    line = text[text.rfind("\n", 0, offset) + 1 : offset]
    return any(piece.group(0) in ('"', "#") for piece in _LINE_PIECES.finditer(line))


def _keyword(name: str, word: str, replace: types.Range) -> types.CompletionItem:
    entry = keywords.describe(word)
    kind = types.CompletionItemKind.EnumMember if name in PROMPT_KINDS else types.CompletionItemKind.Keyword
    return types.CompletionItem(
        label=word,
        kind=kind,
        detail=entry.meaning if entry else None,
        documentation=types.MarkupContent(types.MarkupKind.Markdown, keywords.markdown(entry))
        if entry
        else None,
        text_edit=types.TextEdit(replace, word),
    )


def _name(name: Occurrence, replace: types.Range) -> types.CompletionItem:
    kinds = {"step": types.CompletionItemKind.Function, "label": types.CompletionItemKind.Field}
    details = {"step": "step", "label": "task label", "provider": "LLM provider"}
    return types.CompletionItem(
        label=name.value,
        kind=kinds.get(name.role, types.CompletionItemKind.Value),
        detail=details[name.role],
        text_edit=types.TextEdit(replace, name.value),
    )


def _names(snapshot: Snapshot, before: list[Token], offset: int) -> list[Occurrence]:
    """The names that fit where the parser takes one, after the tokens `before`."""
    previous = before[-1].type if before else ""
    listing = None
    for token in before:
        listing = kind_of_list(token.type, listing)
    names = snapshot.outline.names
    if previous == "NEXT":
        wanted = [n for n in names if n.role == "step" and not n.nested]
    elif previous in ("AFTER", "ON") or (previous == "COMMA" and listing is not None):
        scope = (
            sum(1 for i, t in enumerate(before[:-1]) if t.type == "TASKS" and before[i + 1].type == "LBRACE")
            - 1
        )
        start = max(i for i, t in enumerate(before) if t.type in ("AFTER", "ON"))
        taken = _listed(before, start)
        labels = _labels_beside(snapshot, before[start], offset)
        wanted = [n for n in labels if n.role == "label" and n.scope == scope and n.value not in taken]
    elif previous in ("LLM", "CONDITIONAL_LLM"):
        wanted = [n for n in names if n.role == "provider"]
    else:
        return []
    return list({n.value: n for n in wanted}.values())


def _listed(before: list[Token], start: int) -> set[str]:
    """The labels a name in the `after` or `on` list being written (from `before[start]`)
    must not be: those already in it, and in `after` the label of its own task
    (`label: "..." => "..." after`: five tokens before the `after`)."""
    taken = {str(t) for t in before[start + 1 :] if t.type == "ID"}
    if before[start].type == "AFTER" and start >= 5 and before[start - 4].type == "COLON":
        taken.add(str(before[start - 5]))
    return taken


def _labels_beside(snapshot: Snapshot, keyword: Token, offset: int) -> tuple[Occurrence, ...]:
    """The names of the document with the list being written closed: an `after` list cut
    off, an `on` list as `on all`. Left open, the list would take the label of the task
    on the next line for one of its own names."""
    text = snapshot.text
    line_end = text.find("\n", offset)
    closed = "" if keyword.type == "AFTER" else "on all"
    rest = text[line_end:] if line_end >= 0 else ""
    return outline(scan(text[: keyword.start_pos] + closed + rest), snapshot.path).names
