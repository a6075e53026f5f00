"""Semantic tokens from `todoflow lsp`, asked over stdio by pygls's client and decoded
with the legend the server announced at initialize: what each word is, as the parser
reads it, and deltas that turn the last tokens into the current ones."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from todoflow.lsp.semantic import TOKEN_MODIFIERS, TOKEN_TYPES

from ..conftest import ROOT
from ..lsp.test_lsp import LSP, _doc, editor

pytestmark = pytest.mark.anyio
Decoded = tuple[int, str, str, frozenset[str]]  # line (0-based), text, type, modifiers


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _legend(capabilities: types.ServerCapabilities) -> types.SemanticTokensLegend:
    provider = capabilities.semantic_tokens_provider
    assert isinstance(provider, types.SemanticTokensOptions)
    assert provider.full == types.SemanticTokensFullDelta(delta=True)
    return provider.legend


def _decode(
    text: str, data: list[int] | tuple[int, ...], legend: types.SemanticTokensLegend
) -> list[Decoded]:
    """The tokens as (line, the text they cover, type, modifiers); the text is ASCII or
    in the Basic Multilingual Plane, so UTF-16 units are code points."""
    lines = text.split("\n")
    assert len(data) % 5 == 0
    found, line, start = [], 0, 0
    for index in range(0, len(data), 5):
        delta_line, delta_start, length, kind, bits = data[index : index + 5]
        line += delta_line
        start = delta_start if delta_line else start + delta_start
        assert length > 0 and start + length <= len(lines[line])
        modifiers = frozenset(m for i, m in enumerate(legend.token_modifiers) if bits >> i & 1)
        found.append((line, lines[line][start : start + length], legend.token_types[kind], modifiers))
    return found


async def _full(session: object, uri: str) -> types.SemanticTokens:
    client = session.client  # type: ignore[attr-defined]
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(_doc(uri)))
    assert isinstance(result, types.SemanticTokens)
    return result


DECLARED = frozenset({"declaration"})
NONE: frozenset[str] = frozenset()


async def test_every_word_is_coloured_as_the_parser_reads_it() -> None:
    text = (LSP / "release.todoflow").read_text()
    async with editor() as session:
        uri = session.open(LSP / "release.todoflow")
        legend = _legend(session.capabilities)
        assert (tuple(legend.token_types), tuple(legend.token_modifiers)) == (TOKEN_TYPES, TOKEN_MODIFIERS)
        tokens = _decode(text, (await _full(session, uri)).data, legend)
    kinds = {(word, kind, modifiers) for _, word, kind, modifiers in tokens}
    for expected in [
        ("workflow", "keyword", NONE),
        ("release", "namespace", DECLARED),
        ("regular", "type", NONE),
        ("todo_task", "type", NONE),
        ("prepare", "function", DECLARED),
        ("description", "keyword", NONE),
        ("vertex", "property", NONE),
        ("build", "method", DECLARED),  # the route
        ("build-artifacts", "function", DECLARED),  # the step behind it
        ("tag", "variable", DECLARED),  # a task label
        ("build", "variable", NONE),  # a label named in `after` and `on`
        ("=>", "operator", NONE),
        ("learn_code", "enumMember", NONE),
        ("end", "enumMember", NONE),
        ("100", "number", NONE),
        ('"Ship it"', "string", NONE),
    ]:
        assert expected in kinds, expected
    comments = [word for _, word, kind, _ in tokens if kind == "comment"]
    assert comments == re.findall(r"#[^\n]*", text)
    # a block string: one token per line, from its first character that is not blank
    assert ("Walk the release checklist. Delegate build work to the builder;", "string") in {
        (word, kind) for _, word, kind, _ in tokens
    }
    positions = [(line, text.split("\n")[line].index(word)) for line, word, _, _ in tokens[:3]]
    assert positions == sorted(positions)


async def test_a_keyword_used_as_a_name_is_a_name(tmp_path: Path) -> None:
    text = (
        'workflow tasks "T" {\n'
        '    regular tasks "Tasks" {\n'
        "        next end\n"
        "    }\n"
        '    todo_task after "After" {\n'
        "        generic on\n"
        "        tasks {\n"
        '            work: "w" => "done"\n'
        '            "x" => "y" after work\n'
        '            constraint "c" on all\n'
        "        }\n"
        "    }\n"
        "}\n"
    )
    async with editor() as session:
        uri = session.open(tmp_path / "names.todoflow", text)
        tokens = _decode(text, (await _full(session, uri)).data, _legend(session.capabilities))
    assert (0, "tasks", "namespace", DECLARED) in tokens
    assert (1, "tasks", "function", DECLARED) in tokens
    assert (4, "after", "function", DECLARED) in tokens
    assert (5, "on", "enumMember", NONE) in tokens  # `generic on`
    assert (6, "tasks", "keyword", NONE) in tokens
    assert (7, "work", "variable", DECLARED) in tokens
    assert (8, "after", "keyword", NONE) in tokens
    assert (8, "work", "variable", NONE) in tokens
    assert (9, "on", "keyword", NONE) in tokens  # a constraint's `on`
    assert (9, "all", "enumMember", NONE) in tokens


async def test_a_file_that_does_not_parse_still_has_its_tokens(tmp_path: Path) -> None:
    text = 'workflow w "W" {\n    regular a "A" {\n        descripton "x"\n        next b\n'
    async with editor() as session:
        uri = session.open(tmp_path / "broken.todoflow", text)
        tokens = _decode(text, (await _full(session, uri)).data, _legend(session.capabilities))
    assert (1, "a", "function", DECLARED) in tokens
    assert (3, "next", "keyword", NONE) in tokens
    assert (3, "b", "function", NONE) in tokens


def _apply(data: list[int], edits: list[types.SemanticTokensEdit]) -> list[int]:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        data[edit.start : edit.start + edit.delete_count] = list(edit.data or [])
    return data


async def test_a_delta_turns_the_last_tokens_into_the_current_ones(tmp_path: Path) -> None:
    text = (LSP / "release.todoflow").read_text()
    async with editor() as session:
        uri = session.open(tmp_path / "release.todoflow", text)
        first = await _full(session, uri)
        assert first.result_id
        # a comment and a step appear in the middle of the file
        at = text.index("    todo_task ship")
        added = '    # new\n    regular extra "Extra" {\n        next ship\n    }\n'
        line = text.count("\n", 0, at)
        session.edit(uri, (line, 0), (line, 0), added)
        client = session.client
        params = types.SemanticTokensDeltaParams(_doc(uri), first.result_id)
        delta = await client.text_document_semantic_tokens_full_delta_async(params)
        assert isinstance(delta, types.SemanticTokensDelta)
        assert delta.result_id and delta.result_id != first.result_id
        assert len(delta.edits) == 1
        assert sum(len(e.data or []) for e in delta.edits) < len(first.data)  # only what changed
        now = await _full(session, uri)
        assert _apply(list(first.data), list(delta.edits)) == list(now.data)
        unchanged = await client.text_document_semantic_tokens_full_delta_async(
            types.SemanticTokensDeltaParams(_doc(uri), now.result_id or "")
        )
        assert isinstance(unchanged, types.SemanticTokensDelta) and list(unchanged.edits) == []
        stale = await client.text_document_semantic_tokens_full_delta_async(
            types.SemanticTokensDeltaParams(_doc(uri), first.result_id)
        )
        assert isinstance(stale, types.SemanticTokens)  # a result it no longer has: all the tokens
        assert list(stale.data) == list(now.data)


def test_the_legend_is_documented() -> None:
    editors = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    section = editors.split("### Semantic tokens", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert documented == list(TOKEN_TYPES)


NEOVIM_PROBE = """
vim.wait(20000, function() return #vim.diagnostic.get(0) > 0 end, 100)
io.stdout:write(vim.bo.filetype .. "|" .. #vim.diagnostic.get(0) .. "\\n")
vim.cmd("qa!")
"""


def _neovim_blocks() -> dict[str, str]:
    """The Lua blocks of docs/editors.md, by the version line that introduces them."""
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    found = re.findall(r"\*\*(Neovim [^*]+)\*\*(?:(?!\*\*Neovim).)*?```lua\n(.*?)```", text, re.S)
    return {title: body for title, body in found}


def test_the_neovim_configs_of_the_docs_start_the_server(tmp_path: Path) -> None:
    """Each documented Neovim config on the Neovim installed here, if its block names
    that version (Debian's is 0.7): the file type set, the server started, its
    diagnostics shown."""
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("no nvim on PATH")
    version = subprocess.run([nvim, "--version"], capture_output=True, text=True, check=True).stdout
    minor = int(re.search(r"NVIM v0\.(\d+)", version).group(1))  # type: ignore[union-attr]
    blocks = _neovim_blocks()
    assert set(blocks) == {"Neovim 0.11 or later", "Neovim 0.8, 0.9 and 0.10", "Neovim 0.7"}
    wanted = (
        "Neovim 0.11 or later" if minor >= 11 else "Neovim 0.8, 0.9 and 0.10" if minor >= 8 else "Neovim 0.7"
    )
    (tmp_path / "init.lua").write_text(blocks[wanted])
    (tmp_path / "probe.lua").write_text(NEOVIM_PROBE)
    (tmp_path / "broken.todoflow").write_text('workflow x "X" {\n    regular a "A" { next nowhere }\n}\n')
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    result = subprocess.run(
        [nvim, "--headless", "-u", "init.lua", "broken.todoflow", "-c", "luafile probe.lua"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout.strip().splitlines()[-1] == "todoflow|1", result.stdout + result.stderr
