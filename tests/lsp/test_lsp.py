"""`todoflow lsp` driven as an editor drives it: pygls's own LanguageClient starts the
server as a subprocess and talks LSP over stdio. One test per feature."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

from bench.workload import big_source
from todoflow.dsl.formatter import format_source

from ..conftest import EXAMPLES, FIXTURES, ROOT, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
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
        self.capabilities = types.ServerCapabilities()  # what the server said at initialize

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
        initialized = await client.initialize_async(
            types.InitializeParams(
                capabilities=capabilities or types.ClientCapabilities(), process_id=None, root_uri=None
            )
        )
        session.capabilities = initialized.capabilities
        client.initialized(types.InitializedParams())
        yield session
    finally:  # end the server as an editor does, even after a failed assertion
        with anyio.move_on_after(TIMEOUT):
            await client.shutdown_async(None)
        client.exit(None)
        with anyio.move_on_after(TIMEOUT) as waiting:
            await client.stop()
        if waiting.cancelled_caught and client._server is not None:
            client._server.kill()


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


LSP = FIXTURES / "lsp"


def _at(text: str, needle: str, nth: int = 0, shift: int = 0) -> tuple[int, int]:
    """The 0-based line and character of the `nth` occurrence of `needle` (ASCII text)."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    index += shift
    line = text.count("\n", 0, index)
    return line, index - (text.rfind("\n", 0, index) + 1)


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply text edits (ASCII text) from the last to the first."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = starts[edit.range.start.line] + edit.range.start.character
        end = starts[edit.range.end.line] + edit.range.end.character
        text = text[:start] + edit.new_text + text[end:]
    return text


def _whole(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    lines = text.split("\n")
    return (0, 0), (len(lines) - 1, len(lines[-1]))


async def test_ranges_are_0_based_utf16_at_line_starts_line_ends_tabs_and_emoji(tmp_path: Path) -> None:
    semantic = (
        'workflow w "W" {\n    regular a "A 🎉" { next nowhere }\n'
        + '\tregular b "B" {\n\t\tnext elsewhere\n\t}\n}\n'
    )
    syntax = 'workflow w "W" {\nregulr c "C" {\n}\n}\n'
    async with editor() as session:
        _, first = await session.opened(tmp_path / "semantic.todoflow", semantic)
        _, second = await session.opened(tmp_path / "syntax.todoflow", syntax)
    ranges = {d.message.split("\n")[0]: d.range for d in first}
    # `nowhere` is code points 27-34 of its line; the emoji before it is two UTF-16 units
    nowhere = ranges["`next` names `nowhere`, but there is no step `nowhere`"]
    assert (nowhere.start, nowhere.end) == (types.Position(1, 28), types.Position(1, 35))
    # after two tabs (one unit each), running to the end of the line
    elsewhere = ranges["`next` names `elsewhere`, but there is no step `elsewhere`"]
    assert (elsewhere.start, elsewhere.end) == (types.Position(3, 7), types.Position(3, 16))
    assert len(semantic.split("\n")[3]) == 16
    (misspelt,) = second
    assert misspelt.code == "E0001"
    assert (misspelt.range.start, misspelt.range.end) == (types.Position(1, 0), types.Position(1, 6))


async def test_positions_follow_the_encoding_the_client_offers(tmp_path: Path) -> None:
    text = 'workflow w "W" {\n    regular a "🎉" { next nowhere }\n}\n'
    general = types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf32])
    async with editor(capabilities=types.ClientCapabilities(general=general)) as session:
        _, shown = await session.opened(tmp_path / "a.todoflow", text)
    (unknown,) = [d for d in shown if d.code == "E0102"]
    assert unknown.range.start == types.Position(1, 25)  # code points, as offered (UTF-16: 26)


async def test_a_document_edited_incrementally_is_checked_and_never_stale(tmp_path: Path) -> None:
    path = tmp_path / "typing.todoflow"
    text = 'workflow w "W" {\n    regular a "A" {\n        \n    }\n}\n'
    async with editor() as session:
        uri, shown = await session.opened(path, text)
        assert shown == []
        typed = "descriptio"
        for index, char in enumerate(typed):  # an author typing, one keystroke per change
            version = session.edit(uri, (2, 8 + index), (2, 8 + index), char)
        mid = await session.wait(uri, version)
        assert [d.code for d in mid] == ["E0001"]
        assert "did you mean `description`?" in mid[0].message
        version = session.edit(uri, (2, 18), (2, 18), 'n "Do it."')
        assert await session.wait(uri, version) == []
        version = session.edit(uri, (2, 8), (2, 28), "max_turns 0")  # the whole item
        zero = await session.wait(uri, version)
        assert [(d.code, d.range.start.line) for d in zero] == [("E0203", 2)]
    versions = [p.version for p in session.published[uri]]
    assert versions == sorted(versions)


async def test_changes_made_while_a_check_runs_are_gathered_into_one_check(tmp_path: Path) -> None:
    path = tmp_path / "long.todoflow"
    text = big_source(steps=20, tasks=80)  # ~2,000 lines: a check takes long enough to type into
    async with editor() as session:
        uri, _ = await session.opened(path, text)
        line = _at(text, "Do task 0 of step 0")[0]
        for index in range(10):
            version = session.edit(uri, (line, 17 + index), (line, 17 + index), "x")
        assert await session.wait(uri, version) == []
    published = [p.version for p in session.published[uri]]
    assert published[0] == 1 and published[-1] == version
    assert len(published) <= 3  # the first change at once, the other nine together


async def test_save_checks_again_and_close_clears(tmp_path: Path) -> None:
    shutil.copytree(LSP, tmp_path / "flows")
    path = tmp_path / "flows" / "templated.todoflow"
    async with editor() as session:
        uri, shown = await session.opened(path)
        assert [d.code for d in shown] == ["E0403"]
        (tmp_path / "flows" / "prompts" / "revise.j2").write_text("Revise {{ step.id }}.\n")
        session.client.text_document_did_save(
            types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri))
        )
        assert await session.wait(uri, None, 2) == []  # the template was read again
        session.close(uri)
        assert await session.wait(uri, None, 3) == []
        assert session.published[uri][-1].version is None


async def test_template_errors_show_at_the_template_line_when_open_else_on_the_prompt_line(
    tmp_path: Path,
) -> None:
    shutil.copytree(LSP, tmp_path / "flows")
    path = tmp_path / "flows" / "templated.todoflow"
    template = tmp_path / "flows" / "prompts" / "revise.j2"
    async with editor() as session:
        uri, shown = await session.opened(path)
        (closed,) = shown
        assert closed.message.startswith("revise.j2:3: the template `prompts/revise.j2` uses `resume_from`")
        assert closed.range.start == types.Position(3, 8)  # the `prompt revise from` item
        template_uri = session.open(template, language="jinja")
        on_template = await session.wait(template_uri)
        assert [(d.code, d.range.start.line, d.range.start.character) for d in on_template] == [
            ("E0403", 2, 0)
        ]
        assert on_template[0].message.startswith("the template `prompts/revise.j2` uses `resume_from`")
        # the template is not a workflow: no todoflow keywords in it, no completion
        assert await session.hover(template_uri, 1, 9) is None  # `tasks` in `{% for t in tasks %}`
        asked = types.CompletionParams(_doc(template_uri), types.Position(1, 9))
        assert await session.client.text_document_completion_async(asked) is None
        with anyio.fail_after(TIMEOUT):
            while session.published[uri][-1].diagnostics:
                await session.wait(uri, None, len(session.published[uri]) + 1)
        session.close(template_uri)
        await session.wait(template_uri, None, 2)
        assert session.published[template_uri][-1].diagnostics == ()
        with anyio.fail_after(TIMEOUT):
            while not session.published[uri][-1].diagnostics:
                await session.wait(uri, None, len(session.published[uri]) + 1)
        assert session.published[uri][-1].diagnostics[0].range.start.line == 3


async def _hovers(*spots: tuple[str, int]) -> list[str | None]:
    """Hover over the release fixture at each (text, shift): the first occurrence of the
    text, `shift` characters into it."""
    path = LSP / "release.todoflow"
    text = path.read_text()
    async with editor() as session:
        uri, _ = await session.opened(path)
        return [await session.hover(uri, *_at(text, needle, shift=shift)) for needle, shift in spots]


async def test_hover_on_a_task_shows_its_position_after_ordering_and_its_constraints() -> None:
    tag, announce, build_ref = await _hovers(("tag:", 0), ('"Announce', 3), ("after build", 7))
    assert tag == (
        "**task `tag`** — position **3** of 4 in step `ship`\n\n"
        "written 1st, moved later: it needs task `notes`\n\n"
        "constraints:\n- Never push to main directly"
    )
    assert announce == '**task 4 ("Announce on the mailing list")** — position **4** of 4 in step `ship`'
    assert build_ref is not None
    assert build_ref.startswith("**task `build`** — position **1** of 4 in step `ship`\n\n")
    assert "written 2nd, comes earlier, as the tasks before it moved" in build_ref


async def test_hover_on_a_step_shows_its_resolved_llm_next_and_expected_files() -> None:
    prepare, ship, sub, route = await _hovers(
        ("prepare", 0), ("ship", 0), ("build-artifacts", 0), ("route build", 7)
    )
    assert prepare is not None and ship is not None and sub is not None
    assert '- LLM: `vertex` `"gemini-2.5-pro"` (workflow default, line 3)' in prepare
    assert "- conditional LLM: none set: the runtime's default" in prepare
    assert "- max turns: 60 (workflow default, line 4)" in prepare
    assert "- next: `ship` (the step written after it)" in prepare
    assert "- expected files: `branch.json`" in prepare
    assert '- LLM: `vertex` `"gemini-2.5-pro"` (set on this step)' in ship
    assert '- conditional LLM: `openai` `"gpt-4.1-mini"` (set on this step)' in ship
    assert "- next: `end` (written)" in ship
    assert "returns to its orchestrator `ship` (a sub-agent behind route `build`)" in sub
    assert route == sub


async def test_hover_on_a_keyword_says_what_it_becomes_in_plan_json() -> None:
    description, expect, llm, nothing = await _hovers(
        ("description", 0), ("expect file", 0), ("llm vertex", 0), ('"Release 2.0"', 3)
    )
    assert description == "`description TEXT` — what the step does\n\nemitted as `description` in plan.json"
    assert expect is not None
    assert "`validation_schema.files[] {file_name, must_exist: true}` in plan.json" in expect
    assert llm is not None and "`agent_configs.execution_llm {provider, model_id}` in step_config.json" in llm
    assert nothing is None


def _doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri)


def _spots(locations: Any) -> list[tuple[int, int, int, int]]:
    return sorted(
        (x.range.start.line, x.range.start.character, x.range.end.line, x.range.end.character)
        for x in locations
    )


def _spot(text: str, needle: str, nth: int = 0, shift: int = 0, length: int | None = None) -> tuple[int, ...]:
    line, character = _at(text, needle, nth, shift)
    return (line, character, line, character + (length if length is not None else len(needle) - shift))


async def test_go_to_definition_of_next_after_on_and_routes() -> None:
    path = LSP / "release.todoflow"
    text = path.read_text()

    async def definition(session: Editor, uri: str, where: tuple[int, int]) -> list[tuple[int, ...]]:
        params = types.DefinitionParams(_doc(uri), types.Position(*where))
        return _spots(await session.client.text_document_definition_async(params))

    broken = text.replace("        next end\n", "        next prepare\n        descripton\n")
    async with editor() as session:
        uri, _ = await session.opened(path)
        after_notes = await definition(session, uri, _at(text, "build, notes", shift=8))
        on_tag = await definition(session, uri, _at(text, "on build, tag", shift=11))
        route = await definition(session, uri, _at(text, "route build", shift=7))
        plain = await definition(session, uri, _at(text, "Release 2.0", shift=1))
        other, _ = await session.opened(LSP / "broken.todoflow", broken)  # does not parse
        next_step = await definition(session, other, _at(broken, "next prepare", shift=6))
    assert after_notes == [_spot(text, "notes:", length=5)]
    assert on_tag == [_spot(text, "tag:", length=3)]
    assert route == [_spot(text, "build-artifacts")]
    assert plain == []
    assert next_step == [_spot(broken, "prepare")]


async def test_references_of_a_step_and_of_a_task_label() -> None:
    text = (LSP / "release.todoflow").read_text().replace("        next end\n", "        next prepare\n")
    async with editor() as session:
        uri, _ = await session.opened(LSP / "cycle.todoflow", text)

        async def references(where: tuple[int, int], declaration: bool) -> list[tuple[int, ...]]:
            params = types.ReferenceParams(
                text_document=_doc(uri),
                position=types.Position(*where),
                context=types.ReferenceContext(include_declaration=declaration),
            )
            return _spots(await session.client.text_document_references_async(params))

        build = await references(_at(text, "build:"), True)
        build_uses = await references(_at(text, "build:"), False)
        prepare = await references(_at(text, "next prepare", shift=6), True)
    assert build == sorted(
        [
            _spot(text, "build:", length=5),
            _spot(text, "after build", shift=6),
            _spot(text, "after build", nth=1, shift=6),
            _spot(text, "on build", shift=3),
        ]
    )
    assert build_uses == [s for s in build if s != _spot(text, "build:", length=5)]
    assert prepare == sorted([_spot(text, "prepare"), _spot(text, "next prepare", shift=5)])


async def test_rename_a_step_id_and_a_task_label_across_the_file() -> None:
    path = LSP / "release.todoflow"
    text = path.read_text().replace("        next end\n", "        next prepare\n")
    async with editor() as session:
        uri, _ = await session.opened(LSP / "loop.todoflow", text)

        async def rename(where: tuple[int, int], name: str) -> str:
            spot = types.Position(*where)
            ready = await session.client.text_document_prepare_rename_async(
                types.PrepareRenameParams(_doc(uri), spot)
            )
            assert ready is not None
            edit = await session.client.text_document_rename_async(types.RenameParams(_doc(uri), spot, name))
            assert edit is not None and edit.changes is not None
            return _apply(text, list(edit.changes[uri]))

        step = await rename(_at(text, "next prepare", shift=7), "branch")
        label = await rename(_at(text, "notes:"), "changelog")
        taken = types.RenameParams(_doc(uri), types.Position(*_at(text, "tag:")), "build")
        with pytest.raises(JsonRpcException, match="there is already a task label `build`"):
            await session.client.text_document_rename_async(taken)
        bad = types.RenameParams(_doc(uri), types.Position(*_at(text, "tag:")), "Tag")
        with pytest.raises(JsonRpcException, match="`Tag` is not a name"):
            await session.client.text_document_rename_async(bad)
        for name, refused in (
            ("workflow", "`workflow` is a keyword"),
            ("a" * 100_000, "at most 100 characters"),
        ):
            wrong = types.RenameParams(_doc(uri), types.Position(*_at(text, "tag:")), name)
            with pytest.raises(JsonRpcException, match=refused):
                await session.client.text_document_rename_async(wrong)
        keyword = await session.client.text_document_prepare_rename_async(
            types.PrepareRenameParams(_doc(uri), types.Position(*_at(text, "description")))
        )
    assert keyword is None
    assert step == text.replace("regular prepare", "regular branch").replace("next prepare", "next branch")
    assert label == text.replace("notes:", "changelog:").replace("build, notes", "build, changelog")


async def _complete(session: Editor, uri: str, where: tuple[int, int]) -> dict[str, types.CompletionItem]:
    params = types.CompletionParams(_doc(uri), types.Position(*where))
    result = await session.client.text_document_completion_async(params)
    assert isinstance(result, types.CompletionList)
    return {item.label: item for item in result.items}


async def test_completion_offers_what_the_parser_accepts_at_the_cursor(tmp_path: Path) -> None:
    text = (LSP / "release.todoflow").read_text()
    # an author halfway through a new step: the file does not parse
    steps = [
        "extra",
        "        next ",
        "more",
        "        llm ",
        "item",
        "        de",
        "kinds",
        "        prompt ",
    ]
    added = "".join(f'\n    regular {steps[i]} "Step" {{\n{steps[i + 1]}\n    }}\n' for i in range(0, 8, 2))
    typing = text.replace("        next end\n    }\n", "        next end\n    }\n" + added)
    typing = typing.replace(
        '"The announcement is archived" after tag', '"The announcement is archived" after '
    )
    async with editor() as session:
        uri, _ = await session.opened(tmp_path / "typing.todoflow", typing)
        after_next = await _complete(session, uri, _at(typing, "next \n", shift=5))
        after_llm = await _complete(session, uri, _at(typing, "llm \n", shift=4))
        kinds = await _complete(session, uri, _at(typing, "prompt \n", shift=7))
        item = await _complete(session, uri, _at(typing, "        de\n", shift=10))
        after = await _complete(session, uri, _at(typing, 'archived" after ', shift=16))
        in_string = await _complete(session, uri, _at(typing, "Walk the", shift=4))
        in_comment = await _complete(session, uri, _at(typing, "# preset", shift=4))
        workflow_level = await _complete(session, uri, _at(typing, "    regular prepare"))
    # every top-level step, not the sub-agent build-artifacts
    assert set(after_next) == {"prepare", "ship", "extra", "more", "item", "kinds", "end"}
    assert after_next["ship"].detail == "step"
    assert after_next["end"].kind == types.CompletionItemKind.Keyword
    assert set(after_llm) == {"vertex", "openai"}
    assert set(kinds) == {"orchestrator_system", "orchestrator_user", "intake", "work", "revise", "sub_agent"}
    assert {"description", "success", "needs", "output", "expect", "next", "tasks", "route", "llm"} <= set(
        item
    )
    assert "workflow" not in item and "regular" not in item
    edit = item["description"].text_edit
    assert isinstance(edit, types.TextEdit)
    assert (edit.range.start.character, edit.range.end.character) == (8, 10)  # replaces `de`
    assert item["description"].detail == "what the step does"
    assert set(after) == {"tag", "build", "notes"}
    assert in_string == {} and in_comment == {}
    assert {"regular", "todo_task", "llm", "max_turns", "prompt"} <= set(workflow_level)
    assert "description" not in workflow_level


async def test_code_actions_fix_a_misspelt_keyword_a_missing_brace_and_a_duplicate_item(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fixable.todoflow"
    text = (LSP / "fixable.todoflow").read_text()
    async with editor() as session:
        uri, shown = await session.opened(path, text)

        async def fixes(found: list[types.Diagnostic]) -> dict[str, list[types.TextEdit]]:
            whole = types.Range(*(types.Position(*p) for p in _whole(session.texts[uri])))
            params = types.CodeActionParams(_doc(uri), whole, types.CodeActionContext(diagnostics=found))
            result = await session.client.text_document_code_action_async(params)
            assert result is not None
            out = {}
            for action in result:
                assert isinstance(action, types.CodeAction)
                assert action.kind == types.CodeActionKind.QuickFix and action.edit and action.edit.changes
                out[action.title] = list(action.edit.changes[uri])
            return out

        async def apply(edits: list[types.TextEdit]) -> list[types.Diagnostic]:
            """Apply a fix as an editor does: each edit a change, the last in the file first."""
            session.texts[uri] = _apply(session.texts[uri], edits)
            for edit in sorted(
                edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
            ):
                start, end = edit.range.start, edit.range.end
                version = session.edit(
                    uri, (start.line, start.character), (end.line, end.character), edit.new_text
                )
            return await session.wait(uri, version)

        assert sorted(d.code for d in shown) == ["E0001", "E0002"]
        offered = await fixes(shown)
        assert set(offered) == {"Change to `description`", "Add the missing `}`"}
        shown = await apply(offered["Change to `description`"] + offered["Add the missing `}`"])
        assert session.texts[uri].split("\n")[2:8] == [
            '        description "Write the first draft."',
            '        output "draft.md"',
            '        output "draft.md"',
            "    }",
            "",
            '    regular publish "Publish" {',
        ]
        assert [d.code for d in shown] == ["E0201"]
        offered = await fixes(shown)
        assert set(offered) == {"Remove this duplicate item"}
        assert await apply(offered["Remove this duplicate item"]) == []
    assert session.texts[uri].count('output "draft.md"') == 1


async def test_formatting_the_whole_document_is_todoflow_fmt(tmp_path: Path) -> None:
    messy = FIXTURES / "fmt" / "messy-layout.todoflow"
    text = messy.read_text()
    options = types.FormattingOptions(tab_size=4, insert_spaces=True)
    async with editor() as session:
        uri, _ = await session.opened(tmp_path / "messy.todoflow", text)
        edits = await session.client.text_document_formatting_async(
            types.DocumentFormattingParams(_doc(uri), options)
        )
        broken, _ = await session.opened(tmp_path / "broken.todoflow", "workflow w {\n")
        none = await session.client.text_document_formatting_async(
            types.DocumentFormattingParams(_doc(broken), options)
        )
    assert edits is not None
    assert _apply(text, list(edits)) == format_source(text)
    assert none is None


async def test_document_symbols_nest_workflow_steps_routes_and_tasks() -> None:
    path = LSP / "release.todoflow"
    text = path.read_text()
    async with editor() as session:
        uri, _ = await session.opened(path)
        result = await session.client.text_document_document_symbol_async(
            types.DocumentSymbolParams(_doc(uri))
        )
    assert result is not None

    def tree(symbols: Any) -> list[Any]:
        return [(s.name, s.kind, tree(s.children or [])) for s in symbols]

    kind = types.SymbolKind
    assert tree(result) == [
        (
            "release",
            kind.Module,
            [
                ("prepare", kind.Function, []),
                (
                    "ship",
                    kind.Function,
                    [
                        ("build", kind.Interface, [("build-artifacts", kind.Function, [])]),
                        (
                            "tasks",
                            kind.Array,
                            [
                                ("tag", kind.Event, []),
                                ("build", kind.Event, []),
                                ("notes", kind.Event, []),
                                ("Announce on the mailing list", kind.Event, []),
                            ],
                        ),
                    ],
                ),
            ],
        )
    ]
    (workflow,) = result
    assert isinstance(workflow, types.DocumentSymbol)
    assert workflow.detail == "Release 2.0"
    assert (workflow.range.start.line, workflow.range.end.line) == (1, len(text.rstrip("\n").split("\n")) - 1)
    assert workflow.selection_range == types.Range(types.Position(1, 9), types.Position(1, 16))


async def test_folding_ranges_cover_blocks_and_block_strings() -> None:
    path = LSP / "release.todoflow"
    text = path.read_text()
    async with editor() as session:
        uri, _ = await session.opened(path)
        result = await session.client.text_document_folding_range_async(types.FoldingRangeParams(_doc(uri)))
    assert result is not None
    folds = [(f.start_line, f.end_line) for f in result]

    def block(opening: str) -> tuple[int, int]:
        start = _at(text, opening)[0]
        indent = text.split("\n")[start][: len(opening) - len(opening.lstrip())]
        lines = text.split("\n")
        end = next(i for i, line in enumerate(lines) if i > start and line.startswith(indent + "}"))
        return start, end

    expected = [
        block("workflow release"),
        block("    regular prepare"),
        block("    todo_task ship"),
        (_at(text, 'description """')[0], _at(text, '"""', nth=1)[0]),
        block("        route build"),
        block("            regular build-artifacts"),
        block("        tasks {"),
    ]
    assert folds == sorted(expected)


def test_lsp_without_pygls_says_how_to_install_it(tmp_path: Path) -> None:
    (tmp_path / "pygls").mkdir()
    (tmp_path / "pygls" / "__init__.py").write_text("raise ImportError('no pygls here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "todoflow", "lsp"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == "todoflow: error: `todoflow lsp` needs pygls: pip install 'todoflow[lsp]'\n"


def test_malformed_frames_are_one_line_log_messages_and_the_server_goes_on() -> None:
    """Not JSON, a JSON array, a notification without params: pygls logs each with its
    traceback; the server says each on one line of stderr and still answers."""
    import subprocess

    def frame(body: str) -> bytes:
        return f"Content-Length: {len(body)}\r\n\r\n{body}".encode()

    shutdown = '{"jsonrpc":"2.0","id":1,"method":"shutdown"}'
    frames = [frame("{bad}"), frame("[]"), frame('{"jsonrpc":"2.0","method":1}'), frame(shutdown)]
    result = subprocess.run(
        [sys.executable, "-m", "todoflow", "lsp"],
        input=b"".join([*frames, frame('{"jsonrpc":"2.0","method":"exit"}')]),
        capture_output=True,
        timeout=60,
        check=False,
    )
    errors = result.stderr.decode().splitlines()
    assert "Traceback" not in result.stderr.decode() and len(errors) >= 3
    assert all(line.startswith("todoflow lsp: ") for line in errors)
    assert errors[0] == (
        "todoflow lsp: Unable to handle message: JSONDecodeError: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    assert b'"id": 1' in result.stdout and b'"result": null' in result.stdout
