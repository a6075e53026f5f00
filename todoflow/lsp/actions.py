"""Edits the server proposes: quick fixes for diagnostics, and whole-document formatting.

The fixes read the diagnostics the editor sends back with the request (their code,
range and the help kept in `data`): a "did you mean `x`?" help replaces the word with
`x` (a misspelt keyword, an unknown `next` target or task label); an unclosed `{`
(E0002) gets its `}` where the help says; an item written twice (E0201) can be removed.
Formatting is `todoflow fmt`'s formatter; a file that does not parse is left as it is.
"""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.formatter import format_source

from .snapshot import Snapshot

_DID_YOU_MEAN = re.compile(r"did you mean `([^`]+)`\?")
_BEFORE_LINE = re.compile(r"before line (\d+)")


def code_actions(snapshot: Snapshot, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    actions = []
    for diagnostic in diagnostics:
        if diagnostic.source != "todoflow":
            continue
        help = _help(diagnostic.data)
        fix = None
        suggestion = _DID_YOU_MEAN.search(help)
        if suggestion:
            word = suggestion.group(1)
            fix = (f"Change to `{word}`", [types.TextEdit(diagnostic.range, word)])
        elif diagnostic.code == "E0002":
            fix = ("Add the missing `}`", [_closing_brace(snapshot, diagnostic.range, help)])
        elif diagnostic.code == "E0201":
            fix = ("Remove this duplicate item", [_removal(snapshot, diagnostic.range)])
        if fix is not None:
            title, edits = fix
            actions.append(
                types.CodeAction(
                    title=title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=True,
                    edit=types.WorkspaceEdit(changes={snapshot.uri: edits}),
                )
            )
    return actions


def _help(data: Any) -> str:
    help = data.get("help") if isinstance(data, dict) else None
    return help if isinstance(help, str) else ""


def _closing_brace(snapshot: Snapshot, opening: types.Range, help: str) -> types.TextEdit:
    """`}` on a line of its own, indented as the line that opened the block: before the
    line the help names (the next construct), else at the end of the file."""
    source_lines = snapshot.lines.lines
    opener = source_lines[opening.start.line]
    indent = opener[: len(opener) - len(opener.lstrip(" \t"))]
    before = _BEFORE_LINE.search(help)
    if before:
        line = int(before.group(1)) - 1
        while line > 0 and not source_lines[line - 1].strip():
            line -= 1  # keep the blank lines between the block and what follows it
        position = types.Position(line, 0)
        return types.TextEdit(types.Range(position, position), f"{indent}}}\n")
    end = snapshot.lines.end()
    lead = "" if not source_lines[-1].strip() else "\n"
    return types.TextEdit(types.Range(end, end), f"{lead}{indent}}}\n")


def _removal(snapshot: Snapshot, item: types.Range) -> types.TextEdit:
    """Delete the item; with its whole lines when nothing else stands on them."""
    lines = snapshot.lines.lines
    first, last = lines[item.start.line], lines[item.end.line]
    alone = not first[: item.start.character].strip() and not last[item.end.character :].strip()
    if alone and item.end.line + 1 < len(lines):
        whole = types.Range(types.Position(item.start.line, 0), types.Position(item.end.line + 1, 0))
        return types.TextEdit(whole, "")
    return types.TextEdit(item, "")


def formatting(snapshot: Snapshot) -> list[types.TextEdit] | None:
    try:
        formatted = format_source(snapshot.text, snapshot.path)
    except TodoflowError:
        return None
    if formatted == snapshot.source:
        return []
    whole = types.Range(types.Position(0, 0), snapshot.lines.end())
    return [types.TextEdit(whole, formatted)]
