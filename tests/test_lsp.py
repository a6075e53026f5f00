"""`todoflow lsp` driven as an editor drives it: pygls's own LanguageClient starts the
server as a subprocess and talks LSP over stdio. One test per feature."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

from .conftest import EXAMPLES, FIXTURES, ROOT, run_cli

pytestmark = pytest.mark.anyio
RELEASE = next(p for p in EXAMPLES if p.name == "release.todoflow")
TIMEOUT = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Editor:
    """The editor's side: open documents, their versions, and what the server published."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.published: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.arrived = anyio.Event()

    def take(self, params: types.PublishDiagnosticsParams) -> None:
        self.published.setdefault(params.uri, []).append(params)
        self.arrived.set()

    async def wait(self, uri: str, version: int | None = None, count: int = 1) -> list[types.Diagnostic]:
        """The diagnostics of `uri` once the server has published them for `version`
        (or `count` times, for a document with no version, such as a template)."""
        with anyio.fail_after(TIMEOUT):
            while True:
                shown = self.published.get(uri, [])
                if version is not None and shown and shown[-1].version == version:
                    return list(shown[-1].diagnostics)
                if version is None and len(shown) >= count:
                    return list(shown[-1].diagnostics)
                self.arrived = anyio.Event()
                await self.arrived.wait()

    def open(self, path: Path, text: str | None = None, language: str = "todoflow") -> str:
        uri = from_fs_path(str(path))
        assert uri is not None
        text = path.read_text(encoding="utf-8") if text is None else text
        self.versions[uri], self.texts[uri] = 1, text
        item = types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(item))
        return uri

    async def opened(self, path: Path, text: str | None = None) -> tuple[str, list[types.Diagnostic]]:
        uri = self.open(path, text)
        return uri, await self.wait(uri, 1)

    def edit(self, uri: str, start: tuple[int, int], end: tuple[int, int], new: str) -> int:
        """One incremental change, as an editor sends it for a keystroke."""
        self.versions[uri] += 1
        where = types.Range(types.Position(*start), types.Position(*end))
        change = types.TextDocumentContentChangePartial(range=where, text=new)
        document = types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri])
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(document, [change]))
        return self.versions[uri]

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )

    async def hover(self, uri: str, line: int, character: int) -> str | None:
        params = types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))
        result = await self.client.text_document_hover_async(params)
        if result is None:
            return None
        assert isinstance(result.contents, types.MarkupContent)
        return result.contents.value


@asynccontextmanager
async def editor(
    cwd: Path = ROOT, capabilities: types.ClientCapabilities | None = None
) -> AsyncIterator[Editor]:
    client = LanguageClient("test-editor", "1.0")
    session = Editor(client)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams) -> None:
        session.take(params)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    await client.start_io(sys.executable, "-m", "todoflow", "lsp", cwd=str(cwd), env=env)
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=capabilities or types.ClientCapabilities(), process_id=None, root_uri=None
            )
        )
        client.initialized(types.InitializedParams())
        yield session
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()


def _check_json(path: Path) -> list[dict[str, Any]]:
    result = run_cli("check", "--format", "json", str(path))
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _as_check(diagnostic: types.Diagnostic) -> tuple[Any, ...]:
    """An LSP diagnostic in `todoflow check --format json`'s terms (1-based, ASCII text)."""
    start, end = diagnostic.range.start, diagnostic.range.end
    message, _, help = diagnostic.message.partition("\nhelp: ")
    return (
        diagnostic.code,
        message,
        help.split("\nnote: ")[0] or None,
        start.line + 1,
        start.character + 1,
        end.line + 1,
        end.character + 1,
    )


def _expected(found: dict[str, Any]) -> tuple[Any, ...]:
    keys = ("code", "message", "help", "line", "column", "end_line", "end_column")
    return tuple(found[k] for k in keys)


async def test_a_document_with_several_errors_gets_what_check_reports() -> None:
    path = FIXTURES / "invalid" / "several-errors.todoflow"
    async with editor() as session:
        _, shown = await session.opened(path)
    expected = _check_json(path)
    assert len(expected) == 6
    assert [_as_check(d) for d in shown] == [_expected(d) for d in expected]
    assert {d.severity for d in shown} == {types.DiagnosticSeverity.Error}
    assert {d.source for d in shown} == {"todoflow"}
