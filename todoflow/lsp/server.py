"""`todoflow lsp`: the language server over stdio (pygls), wiring the features to LSP.

Diagnostics run `analyze` (what `todoflow check` runs) in a worker thread, so the
server keeps answering while a long file is checked. They are debounced without
delaying a lone edit: a change made while the editor is idle is checked at once;
changes that arrive while a check runs are gathered, and the newest text is checked
once typing has paused for `DEBOUNCE` seconds. A result whose text has changed since
is never published. Every other feature reads a `Snapshot` of the current version.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.spans import Span

from . import actions, completion, diagnostics, hover, navigation, semantic, symbols
from .outline import Occurrence
from .snapshot import Snapshot

LEGEND = types.SemanticTokensLegend(
    token_types=list(semantic.TOKEN_TYPES), token_modifiers=list(semantic.TOKEN_MODIFIERS)
)
DEBOUNCE = 0.15  # seconds of quiet after a burst of changes before the next check


@dataclass
class _Checks:
    """The diagnostics pipeline of one workflow document."""

    task: asyncio.Task[None] | None = None
    changed: float = 0.0  # loop time of the last change
    templates: set[str] = field(default_factory=set)  # template paths this document published to


class TodoflowServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "todoflow", version("todoflow"), text_document_sync_kind=types.TextDocumentSyncKind.Incremental
        )
        self.checks: dict[str, _Checks] = {}
        self.snapshots: dict[str, Snapshot] = {}
        # template path -> workflow URI -> its diagnostics there (several workflows may share a template)
        self.template_diagnostics: dict[str, dict[str, list[types.Diagnostic]]] = {}
        self.semantic: dict[str, tuple[str, list[int]]] = {}  # URI -> the tokens last sent, by result id
        self.results = 0

    # -- documents ---------------------------------------------------------------

    def snapshot(self, uri: str) -> Snapshot:
        """The current version of a document, shared by the requests about it."""
        document = self.workspace.get_text_document(uri)
        source = document.source
        cached = self.snapshots.get(uri)
        if cached is not None and cached.version == document.version and cached.source is source:
            return cached
        encoding = str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)
        self.snapshots[uri] = Snapshot(uri, _path_of(uri), document.version, source, encoding)
        return self.snapshots[uri]

    def semantic_tokens(self, uri: str) -> tuple[str, list[int]]:
        """The document's semantic tokens and a new result id, remembered for a delta."""
        self.results += 1
        self.semantic[uri] = (str(self.results), semantic.tokens(self.snapshot(uri)))
        return self.semantic[uri]

    def is_open(self, path: str) -> bool:
        uri = from_fs_path(path)
        return uri is not None and uri in self.workspace.text_documents

    # -- diagnostics -------------------------------------------------------------

    def schedule(self, uri: str) -> None:
        checks = self.checks.setdefault(uri, _Checks())
        checks.changed = asyncio.get_running_loop().time()
        if checks.task is None or checks.task.done():
            checks.task = asyncio.ensure_future(self._check(uri, checks))

    async def _check(self, uri: str, checks: _Checks) -> None:
        loop = asyncio.get_running_loop()
        while uri in self.workspace.text_documents:
            snapshot = self.snapshot(uri)
            analysis = await asyncio.to_thread(diagnostics.analyze_document, snapshot.source, snapshot.path)
            if uri not in self.workspace.text_documents:
                return
            if self.workspace.get_text_document(uri).version == snapshot.version:
                self._publish(snapshot, diagnostics.by_file(analysis, snapshot, self.is_open), checks)
                return
            while (quiet := checks.changed + DEBOUNCE - loop.time()) > 0:
                await asyncio.sleep(quiet)

    def _publish(self, snapshot: Snapshot, grouped: dict[str, list[Diagnostic]], checks: _Checks) -> None:
        def uri_of(path: str) -> str:  # an untitled document has a URI but no path
            return snapshot.uri if path == snapshot.path else _uri_of(path)

        own = diagnostics.to_lsp(grouped.pop(snapshot.path), snapshot.lines, uri_of)
        self.publish_to(snapshot.uri, snapshot.version, own)
        for path in checks.templates - set(grouped):
            self.on_template(path, snapshot.uri, [])
        for path, found in grouped.items():
            template = self.snapshot(_uri_of(path))
            self.on_template(path, snapshot.uri, diagnostics.to_lsp(found, template.lines, uri_of))
        checks.templates = set(grouped)

    def on_template(self, path: str, owner: str, found: list[types.Diagnostic]) -> None:
        """Publish on a template what one workflow reports there, beside the others'."""
        shown = self.template_diagnostics.setdefault(path, {})
        shown[owner] = found
        merged = [d for each in shown.values() for d in each]
        self.publish_to(_uri_of(path), None, merged)

    def publish_to(self, uri: str, version: int | None, found: list[types.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=version)
        )

    def recheck_workflows(self) -> None:
        """Check every open workflow again: a template was opened, closed or saved."""
        for uri in list(self.checks):
            if uri in self.workspace.text_documents:
                self.schedule(uri)


def _path_of(uri: str) -> str:
    return to_fs_path(uri) or uri


def _uri_of(path: str) -> str:
    return from_fs_path(path) or path


def is_workflow(uri: str, language: str | None = None) -> bool:
    return language == "todoflow" or uri.endswith(".todoflow")


def _range(snapshot: Snapshot, span: Span) -> types.Range:
    return snapshot.lines.range(span)


# -- handlers: pygls passes the server as `ls` ------------------------------------


def did_open(ls: TodoflowServer, params: types.DidOpenTextDocumentParams) -> None:
    document = params.text_document
    if is_workflow(document.uri, document.language_id):
        ls.schedule(document.uri)
    else:
        ls.recheck_workflows()


def did_change(ls: TodoflowServer, params: types.DidChangeTextDocumentParams) -> None:
    if params.text_document.uri in ls.checks:
        ls.schedule(params.text_document.uri)


def did_save(ls: TodoflowServer, params: types.DidSaveTextDocumentParams) -> None:
    if params.text_document.uri in ls.checks:
        ls.schedule(params.text_document.uri)
    else:
        ls.recheck_workflows()


def did_close(ls: TodoflowServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    checks = ls.checks.pop(uri, None)
    ls.snapshots.pop(uri, None)
    ls.semantic.pop(uri, None)
    if checks is None:
        ls.recheck_workflows()
        return
    if checks.task is not None:
        checks.task.cancel()
    ls.publish_to(uri, None, [])
    for path in checks.templates:
        ls.on_template(path, uri, [])
        del ls.template_diagnostics[path][uri]


def _workflows_only(handler: Callable[[TodoflowServer, Any], Any]) -> Callable[[TodoflowServer, Any], Any]:
    """A request about a document that is not a workflow (a prompt template, which the
    editor sends for its diagnostics) is answered with nothing."""

    @functools.wraps(handler)
    def answer(ls: TodoflowServer, params: Any) -> Any:
        return handler(ls, params) if params.text_document.uri in ls.checks else None

    return answer


def on_hover(ls: TodoflowServer, params: types.HoverParams) -> types.Hover | None:
    snapshot = ls.snapshot(params.text_document.uri)
    found = hover.hover(snapshot, snapshot.lines.point(params.position))
    if found is None:
        return None
    text, span = found
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text), _range(snapshot, span))


def _name_at(ls: TodoflowServer, params: Any) -> tuple[Snapshot, Occurrence | None]:
    """The document of a request and the name at its position, if any."""
    snapshot = ls.snapshot(params.text_document.uri)
    return snapshot, navigation.name_at(snapshot.outline.names, snapshot.lines.point(params.position))


def _locations(snapshot: Snapshot, found: list[Occurrence]) -> list[types.Location]:
    return [types.Location(snapshot.uri, _range(snapshot, n.span)) for n in found]


def definition(ls: TodoflowServer, params: types.DefinitionParams) -> list[types.Location]:
    snapshot, at = _name_at(ls, params)
    return _locations(snapshot, navigation.definitions(snapshot.outline.names, at) if at else [])


def references(ls: TodoflowServer, params: types.ReferenceParams) -> list[types.Location]:
    snapshot, at = _name_at(ls, params)
    declaration = params.context.include_declaration
    return _locations(snapshot, navigation.references(snapshot.outline.names, at, declaration) if at else [])


def prepare_rename(ls: TodoflowServer, params: types.PrepareRenameParams) -> types.Range | None:
    snapshot, at = _name_at(ls, params)
    target = navigation.renamable(at)
    return _range(snapshot, target.span) if target else None


def rename(ls: TodoflowServer, params: types.RenameParams) -> types.WorkspaceEdit | None:
    snapshot, at = _name_at(ls, params)
    target = navigation.renamable(at)
    if target is None:
        return None
    found = navigation.rename(snapshot.outline.names, target, params.new_name)
    edits = [types.TextEdit(_range(snapshot, n.span), params.new_name) for n in found]
    return types.WorkspaceEdit(changes={snapshot.uri: edits})


def complete(ls: TodoflowServer, params: types.CompletionParams) -> types.CompletionList:
    snapshot = ls.snapshot(params.text_document.uri)
    items = completion.complete(snapshot, snapshot.lines.point(params.position))
    return types.CompletionList(is_incomplete=False, items=items)


def code_action(ls: TodoflowServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    snapshot = ls.snapshot(params.text_document.uri)
    return actions.code_actions(snapshot, list(params.context.diagnostics))


def formatting(ls: TodoflowServer, params: types.DocumentFormattingParams) -> list[types.TextEdit] | None:
    return actions.formatting(ls.snapshot(params.text_document.uri))


def document_symbol(ls: TodoflowServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    snapshot = ls.snapshot(params.text_document.uri)
    return symbols.document_symbols(snapshot.outline, snapshot.lines)


def semantic_tokens_full(ls: TodoflowServer, params: types.SemanticTokensParams) -> types.SemanticTokens:
    result_id, data = ls.semantic_tokens(params.text_document.uri)
    return types.SemanticTokens(data=data, result_id=result_id)


def semantic_tokens_delta(
    ls: TodoflowServer, params: types.SemanticTokensDeltaParams
) -> types.SemanticTokens | types.SemanticTokensDelta:
    """The edit from the tokens sent as `previous_result_id`; all the tokens when that
    result is not the last one sent for the document."""
    previous = ls.semantic.get(params.text_document.uri)
    result_id, data = ls.semantic_tokens(params.text_document.uri)
    if previous is None or previous[0] != params.previous_result_id:
        return types.SemanticTokens(data=data, result_id=result_id)
    edit = semantic.delta(previous[1], data)
    edits = [] if edit is None else [types.SemanticTokensEdit(edit[0], edit[1], edit[2])]
    return types.SemanticTokensDelta(edits=edits, result_id=result_id)


def folding_range(ls: TodoflowServer, params: types.FoldingRangeParams) -> list[types.FoldingRange]:
    return symbols.folding_ranges(ls.snapshot(params.text_document.uri).outline)


_FEATURES: tuple[tuple[str, Any, Callable[..., Any]], ...] = (
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False), did_save),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (types.TEXT_DOCUMENT_HOVER, None, _workflows_only(on_hover)),
    (types.TEXT_DOCUMENT_DEFINITION, None, _workflows_only(definition)),
    (types.TEXT_DOCUMENT_REFERENCES, None, _workflows_only(references)),
    (types.TEXT_DOCUMENT_PREPARE_RENAME, None, _workflows_only(prepare_rename)),
    (types.TEXT_DOCUMENT_RENAME, types.RenameOptions(prepare_provider=True), _workflows_only(rename)),
    (
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[" ", ","]),
        _workflows_only(complete),
    ),
    (
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
        _workflows_only(code_action),
    ),
    (types.TEXT_DOCUMENT_FORMATTING, None, _workflows_only(formatting)),
    (types.TEXT_DOCUMENT_DOCUMENT_SYMBOL, None, _workflows_only(document_symbol)),
    (types.TEXT_DOCUMENT_FOLDING_RANGE, None, _workflows_only(folding_range)),
    (types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND, _workflows_only(semantic_tokens_full)),
    (types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA, LEGEND, _workflows_only(semantic_tokens_delta)),
)


def create() -> TodoflowServer:
    server = TodoflowServer()
    for method, options, handler in _FEATURES:
        server.feature(method, options)(handler)
    return server


class _OneLine(logging.Formatter):
    """pygls logs a frame it cannot read with its traceback (`logger.exception`); stderr
    gets one line instead: what failed and why."""

    def format(self, record: logging.LogRecord) -> str:
        lines = [line for line in record.getMessage().splitlines() if line.strip()]
        parts = lines[:1] + lines[-1:] if len(lines) > 1 else lines  # a traceback in the text: its last line
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            parts.append(f"{type(error).__name__}: {str(error).partition(chr(10))[0]}".rstrip(": "))
        return "todoflow lsp: " + ": ".join(parts)


def _quiet_pygls() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    logger = logging.getLogger("pygls")
    logger.addHandler(handler)
    logger.propagate = False


def serve() -> None:
    """Run the server on stdin/stdout until the editor ends it."""
    _quiet_pygls()
    create().start_io()
