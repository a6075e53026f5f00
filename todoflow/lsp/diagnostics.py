"""The diagnostics of `todoflow check`, as an editor shows them.

`analyze` (the same function behind `check`) gives every diagnostic with its code,
message and span; here each becomes an LSP diagnostic of the file it points into.
A prompt template's own problems point at the template's line: they are shown there
when the editor has that template open, and otherwise on the `prompt ... from` line
that names it, with the template's line in the message. The help line and the notes
travel with the message; `data` keeps the help for the code actions.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable
from pathlib import Path

from lsprotocol import types

from todoflow.compiler.analysis import Analysis, analyze
from todoflow.dsl import ast
from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.spans import Span

from .positions import LineIndex
from .snapshot import Snapshot

SOURCE = "todoflow"
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "note": types.DiagnosticSeverity.Information,
}
_UNNECESSARY = frozenset({"W0104"})  # a step that can never run: shown faded


def analyze_document(source: str, path: str) -> Analysis:
    """What `todoflow check` reports for an editor's text; templates are read beside the file."""
    base = Path(path).parent if os.path.isabs(path) else None
    return analyze(source, path, base)


def by_file(
    analysis: Analysis, snapshot: Snapshot, is_open: Callable[[str], bool]
) -> dict[str, list[Diagnostic]]:
    """The diagnostics of one analysis grouped by the path they are shown in: the
    document's own, and each open template's."""
    grouped: dict[str, list[Diagnostic]] = {snapshot.path: []}
    templates: dict[str, ast.Prompt] | None = None
    for diagnostic in analysis.diagnostics:
        where = diagnostic.span.path
        if where == snapshot.path:
            grouped[snapshot.path].append(diagnostic)
        elif is_open(os.path.normpath(where)):
            grouped.setdefault(os.path.normpath(where), []).append(diagnostic)
        else:
            templates = _template_items(snapshot) if templates is None else templates
            grouped[snapshot.path].append(_on_prompt_line(diagnostic, templates.get(where)))
    return grouped


def _template_items(snapshot: Snapshot) -> dict[str, ast.Prompt]:
    """Each `prompt ... from "file"` item by the path its diagnostics carry."""
    workflow = snapshot.parsed.workflow
    if workflow is None:
        return {}
    items = [*workflow.defaults, *(i for top in workflow.steps for s in top.walk() for i in s.items)]
    folder = posixpath.dirname(snapshot.path)
    return {
        posixpath.join(folder, item.path.value): item
        for item in items
        if isinstance(item, ast.Prompt) and item.path is not None
    }


def _on_prompt_line(diagnostic: Diagnostic, item: ast.Prompt | None) -> Diagnostic:
    span = diagnostic.span
    where = f"{posixpath.basename(span.path)}:{span.line}" if span.line else posixpath.basename(span.path)
    target = item.span if item is not None else Span(span.path, 1, 1, 1, 1)
    return Diagnostic(
        diagnostic.code,
        diagnostic.severity,
        f"{where}: {diagnostic.message}",
        target,
        diagnostic.help,
        diagnostic.notes,
    )


def to_lsp(
    diagnostics: Iterable[Diagnostic], lines: LineIndex, uri_of: Callable[[str], str]
) -> list[types.Diagnostic]:
    return [_one(d, lines, uri_of) for d in diagnostics]


def _one(diagnostic: Diagnostic, lines: LineIndex, uri_of: Callable[[str], str]) -> types.Diagnostic:
    message = diagnostic.message
    if diagnostic.help:
        message += f"\nhelp: {diagnostic.help}"
    related = []
    for note in diagnostic.notes:
        if note.span is None or not note.span.line:
            message += f"\nnote: {note.message}"
            continue
        location = types.Location(uri_of(note.span.path), lines.range(note.span))
        related.append(types.DiagnosticRelatedInformation(location, note.message))
    return types.Diagnostic(
        range=lines.range(diagnostic.span),
        message=message,
        severity=_SEVERITY[diagnostic.severity],
        code=diagnostic.code,
        source=SOURCE,
        related_information=related or None,
        tags=[types.DiagnosticTag.Unnecessary] if diagnostic.code in _UNNECESSARY else None,
        data={"help": diagnostic.help} if diagnostic.help else None,
    )
