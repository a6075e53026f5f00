"""Diagnostics as you type: a one-character edit of a 2,000-line workflow, until the
language server has published its diagnostics, end to end over stdio (`todoflow lsp`
driven by pygls's client), against `todoflow check` of the same file in process, in
the same run. Rounds interleave the two, each after the same pause (an author pauses
between edits; on this kind of machine a process woken from a pause runs a check
20-40% slower than one in a tight loop, so both sides get the pause). The tight-loop
figure of `check` is printed too, for scale.

    .venv/bin/python -m bench.lsp
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

from bench.measure import Figure, report
from bench.workload import big_source
from todoflow.cli import main as cli

ROUNDS = 41
PAUSE = 0.3  # seconds before each measured step
TARGET = 1.5


def check_in_process(path: Path) -> float:
    """One `todoflow check FILE`, as the command runs it, in this process."""
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        status = cli(["check", str(path)])
    elapsed = time.perf_counter() - start
    assert status == 0
    return elapsed


async def rounds(path: Path, text: str, line: int, column: int) -> tuple[list[float], list[float]]:
    """Per round, after a pause each: one `check` in process, then one one-character edit
    over stdio, timed from sending it to receiving its diagnostics."""
    client = LanguageClient("bench", "1")
    arrived: dict[int, asyncio.Event] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams) -> None:
        assert len(params.diagnostics) == 0, params.diagnostics
        arrived.setdefault(params.version or 0, asyncio.Event()).set()

    await client.start_io(sys.executable, "-m", "todoflow", "lsp")
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())
    uri = from_fs_path(str(path))
    assert uri is not None
    item = types.TextDocumentItem(uri=uri, language_id="todoflow", version=1, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(item))
    await arrived.setdefault(1, asyncio.Event()).wait()
    checks, edits = [], []
    for version in range(2, ROUNDS + 2):
        await asyncio.sleep(PAUSE)
        checks.append(check_in_process(path))
        await asyncio.sleep(PAUSE)
        typed = version % 2 == 0  # type a character inside a description, then delete it
        end = column + (0 if typed else 1)
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, column), types.Position(line, end)),
            text="x" if typed else "",
        )
        document = types.VersionedTextDocumentIdentifier(uri=uri, version=version)
        start = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(document, [change]))
        await arrived.setdefault(version, asyncio.Event()).wait()
        edits.append(time.perf_counter() - start)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return checks, edits


def main() -> list[Figure]:
    text = big_source(steps=20, tasks=80)
    lines = text.split("\n")
    line = next(i for i, each in enumerate(lines) if "Work through checklist 10" in each)
    column = lines[line].index("checklist")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.todoflow"
        path.write_text(text, encoding="utf-8")
        check_in_process(path)  # load the parser once, as a running server has
        checks, edits = asyncio.run(rounds(path, text, line, column))
    print(f"workflow: {len(lines) - 1} lines, {len(text.encode()) / 1000:.0f} kB")
    figure = Figure(
        "one-character edit -> diagnostics, over stdio",
        "todoflow check in process, after the same pause",
        target=f"<= {TARGET}",
        unit="ms",
    )
    for edit, check in zip(edits, checks, strict=True):
        figure.add(edit, check)
    report("lsp (each round one edit)", [figure], ROUNDS)
    return [figure]


if __name__ == "__main__":
    main()
