"""The MCP server driven by the official MCP client over stdio, as any agent would."""

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
from mcp import ClientSession, StdioServerParameters, stdio_client

from ...conftest import FIXTURES, ROOT, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
READY = [
    {
        "label": "notes",
        "action": "Write release notes",
        "expected_result": "NOTES.md exists",
        "after": ["build"],
    },
    {"label": "build", "action": "Build the wheel", "expected_result": "dist/ holds the wheel"},
    {"action": "Announce", "expected_result": "The announcement is archived"},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def serve(folder: Path, *flows: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "todoflow", "serve", *flows, "--run-dir", str(folder / "runs")],
        cwd=str(folder),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    return result.content[0].text  # type: ignore[union-attr,no-any-return]


async def begin(session: ClientSession, **prepare: Any) -> dict[str, Any]:
    prepared = await call(session, "start", action="prepare", parentExecutionId="none", **prepare)
    return await call(session, "start", action="execute", startAttemptId=prepared["startAttemptId"])


async def answer(session: ClientSession, directive: dict[str, Any], **reply: Any) -> dict[str, Any]:
    """`step` with a reply to `directive` (its process, its attempt)."""
    return await call(
        session, "step", processId=directive["processId"], attemptId=directive["attemptId"], **reply
    )


async def pass_ready_list(
    session: ClientSession, directive: dict[str, Any]
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """At intake, pass the ready checklist on unchanged (as the protocol asks)."""
    ready = [
        {"action": t["action"], "expected_result": t["expected_result"]} for t in directive["ready_tasks"]
    ]
    after = await answer(
        session,
        directive,
        tasks=ready,
        progress_checklist_outcome=f"{len(ready)} tasks",
    )
    return ready, after


def confirm(n: int) -> dict[str, str]:
    return {"evidence": f"checked {n}", "progress_execution_outcome": f"done {n}"}


async def test_tools_and_their_schemas(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {
            "start",
            "step",
            "status",
            *("create_todo", "update_todo", "complete_todo", "list_todos", "get_todo"),
        }
        # every accepted field, its description on the property itself (issues 12 and 13)
        evidence = tools["step"].input_schema["properties"]["evidence"]
        assert evidence["maxLength"] == 500 and evidence["description"]
        task = tools["step"].input_schema["properties"]["tasks"]
        assert task["maxItems"] == 100 and task["items"]["properties"]["action"]["maxLength"] == 1000
        # issue 26: a title on each tool, the reads marked read-only, the served workflow ids
        assert all(t.title and t.annotations and t.annotations.title == t.title for t in tools.values())
        read_only = {name for name, t in tools.items() if t.annotations and t.annotations.read_only_hint}
        assert read_only == {"status", "list_todos", "get_todo"}
        assert tools["start"].input_schema["properties"]["workflowId"]["enum"] == [
            "moira/todo-list",
            "todo-list",
        ]
        card = await call(session, "status")
        assert "processId" not in card or isinstance(card["processId"], str)


async def test_an_answer_is_its_structured_content_and_that_as_compact_json_text(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["step"].output_schema is not None and tools["step"].output_schema["type"] == "object"
        directive = await begin(session, workflowId="todo-list", tasks=READY[2:])
        result = await session.call_tool(
            "step",
            {
                "processId": directive["processId"],
                "attemptId": directive["attemptId"],
                "tasks": READY[2:],
                "progress_checklist_outcome": "ready",
            },
        )
        text = result.content[0].text  # type: ignore[union-attr]
        # for clients that read only the text: the same JSON, on one line (not indented)
        assert json.loads(text) == result.structured_content and "\n" not in text
        assert result.structured_content is not None and result.structured_content["node"] == "work"


async def test_the_server_says_its_version_and_one_spelling_of_the_process_id(tmp_path: Path) -> None:
    from importlib.metadata import version

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "todoflow", "serve", "--run-dir", str(tmp_path / "runs")],
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        initialized = await session.initialize()
        assert initialized.server_info.version == version("todoflow") != ""
        directive = await begin(session, workflowId="todo-list", tasks=READY)
        card = await call(session, "status", processId=directive["processId"])
        assert card["processId"] == directive["processId"] and "process_id" not in card


async def test_a_full_run_with_a_ready_list(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        prepared = await call(
            session, "start", action="prepare", workflowId="todo-list", parentExecutionId="none", tasks=READY
        )
        assert prepared["taskCount"] == 3
        assert prepared["notes"] == ["task `notes` moved after task `build`: it needs task `build`"]
        directive = await call(session, "start", action="execute", startAttemptId=prepared["startAttemptId"])
        assert directive["node"] == "intake"
        ready = directive["ready_tasks"]
        assert [t["action"] for t in ready] == ["Build the wheel", "Write release notes", "Announce"]
        process, attempt = directive["processId"], directive["attemptId"]
        tasks = [{"action": t["action"], "expected_result": t["expected_result"]} for t in ready]
        directive = await call(
            session,
            "step",
            processId=process,
            attemptId=attempt,
            tasks=tasks,
            progress_checklist_outcome="three tasks",
        )
        assert directive["role"] == "Task 1/3" and "Build the wheel" in directive["prompt"]
        for n in range(3):
            directive = await answer(session, directive, **confirm(n))
        assert directive == {"processId": process, "completed": True, "result": {}}
    listing = json.loads((tmp_path / "runs" / process / "run.json").read_text())
    assert listing["parent_execution_id"] == "none"


async def test_the_ready_checklist_round_trips_verbatim_through_the_official_client(tmp_path: Path) -> None:
    """Issue 26: the intake prompt says to pass `ready_tasks` on unchanged; sending exactly
    that, constraints and all, is accepted; constraints that differ are refused, each named."""
    ready = [
        {**READY[0], "constraints": ["Link every PR"]},
        READY[1],
        {**READY[2], "constraints": ["Only after the wheel is out", "Mention the changelog"]},
    ]
    async with serve(tmp_path) as session:
        directive = await begin(session, workflowId="todo-list", tasks=ready)
        handed = directive["ready_tasks"]
        assert [t.get("constraints") for t in handed] == [
            None,
            ["Link every PR"],
            ["Only after the wheel is out", "Mention the changelog"],
        ]
        changed = [{**t, "constraints": ["Mine"]} for t in handed]
        reason = await refused(
            session,
            "step",
            processId=directive["processId"],
            attemptId=directive["attemptId"],
            tasks=changed,
            progress_checklist_outcome="x",
        )
        assert "tasks[0].constraints, tasks[1].constraints, tasks[2].constraints differ" in reason
        directive = await answer(session, directive, tasks=handed, progress_checklist_outcome="three")
        assert directive["role"] == "Task 1/3"
        directive = await answer(session, directive, **confirm(1))
        assert directive["task"]["constraints"] == ["Link every PR"]  # the plan kept them


async def test_a_list_the_agent_composes_and_a_revision_that_keeps_the_prefix(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        directive = await begin(session, workflowId="moira/todo-list", goal="Tidy the repository")
        assert directive["ready_tasks"] is None
        assert "Compose the checklist once, from the goal: Tidy the repository" in directive["prompt"]
        process = directive["processId"]
        tasks = [{"action": a, "expected_result": f"{a} done"} for a in ("lint", "test", "docs")]
        directive = await answer(
            session,
            directive,
            tasks=tasks,
            progress_checklist_outcome="three tasks",
        )
        directive = await answer(session, directive, **confirm(1))
        directive = await answer(
            session,
            directive,
            teleportTo="teleport-revise-tasks",
        )
        assert directive["role"] == "Revise checklist"
        revised = [tasks[0], {"action": "types", "expected_result": "mypy clean"}, tasks[1], tasks[2]]
        directive = await answer(
            session,
            directive,
            tasks=revised,
            resume_from_task=2,
            progress_checklist_outcome="added types",
            progress_execution_outcome="lint stays done",
        )
        assert directive["role"] == "Task 2/4" and directive["task"]["action"] == "types"
        card = await call(session, "status", processId=process)
        assert card["checklist"]["results"] == ["done 1", "Pending", "Pending", "Pending"]
        assert card["directive"]["attemptId"] == directive["attemptId"]


async def test_a_revision_past_the_end_completes(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        directive = await begin(session, workflowId="todo-list", tasks=READY[1:])
        process = directive["processId"]
        ready, directive = await pass_ready_list(session, directive)
        directive = await answer(session, directive, **confirm(1))
        directive = await answer(
            session,
            directive,
            teleportTo="teleport-revise-tasks",
        )
        directive = await answer(
            session,
            directive,
            tasks=ready[:1],
            resume_from_task=2,
            progress_checklist_outcome="nothing left",
            progress_execution_outcome="the build was all",
        )
        assert directive == {"processId": process, "completed": True, "result": {}}


async def test_every_refusal_names_the_field_and_rule_and_changes_nothing(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        prepared = await call(
            session, "start", action="prepare", workflowId="todo-list", parentExecutionId="p"
        )
        directive = await call(session, "start", action="execute", startAttemptId=prepared["startAttemptId"])
        process, attempt = directive["processId"], directive["attemptId"]
        replay = await refused(session, "start", action="execute", startAttemptId=prepared["startAttemptId"])
        assert f"was executed already (process `{process}`)" in replay
        teleport = await refused(
            session, "step", processId=process, attemptId=attempt, teleportTo="teleport-revise-tasks"
        )
        assert "teleportTo is only possible while working on a task" in teleport
        assert '"node": "intake"' in teleport  # the current directive, repeated
        many = [{"action": f"t{i}", "expected_result": "ok"} for i in range(101)]
        too_many = await refused(
            session, "step", processId=process, attemptId=attempt, tasks=many, progress_checklist_outcome="x"
        )
        assert "tasks holds 101 tasks; at most 100" in too_many
        directive = await call(
            session,
            "step",
            processId=process,
            attemptId=attempt,
            tasks=many[:2],
            progress_checklist_outcome="two",
        )
        long = await refused(
            session,
            "step",
            processId=process,
            attemptId=directive["attemptId"],
            evidence="e" * 612,
            progress_execution_outcome="ok",
        )
        assert "evidence is 612 characters; at most 500" in long and "current directive" in long
        empty = await refused(
            session,
            "step",
            processId=process,
            attemptId=directive["attemptId"],
            evidence="checked",
            progress_execution_outcome="",
        )
        assert "progress_execution_outcome is empty" in empty
        stale = await refused(session, "step", processId=process, attemptId=attempt, **confirm(1))
        assert f"attempt `{attempt}` is stale or used" in stale and directive["attemptId"] in stale
        card = await call(session, "status", processId=process)
        assert card["directive"]["attemptId"] == directive["attemptId"]
        assert card["work"]["role"] == "Task 1/2"


async def test_a_killed_server_is_replaced_and_the_run_continues(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        directive = await begin(session, workflowId="todo-list", tasks=READY[1:])
        process = directive["processId"]
        _ready, directive = await pass_ready_list(session, directive)
        directive = await answer(session, directive, **confirm(1))
    async with serve(tmp_path) as session:  # a new server process on the same run folder
        card = await call(session, "status", processId=process)
        assert card["work"]["role"] == "Task 2/2"
        attempt = card["directive"]["attemptId"]
        assert attempt == directive["attemptId"]
        done = await call(session, "step", processId=process, attemptId=attempt, **confirm(2))
        assert done["completed"] is True
        runs = await call(session, "status")
        assert [r["processId"] for r in runs["runs"]] == [process]
    listing = run_cli("status", "--run-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert listing.stdout.startswith(f"{process}  complete")


async def test_twenty_processes_interleaved_in_one_server(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        directives = [await begin(session, workflowId="todo-list", tasks=READY[1:]) for _ in range(20)]
        for round_ in range(3):  # intake, then two confirmations, one process after the other
            for index, directive in enumerate(directives):
                arguments: dict[str, Any]
                if round_ == 0:
                    tasks = [
                        {"action": t["action"], "expected_result": t["expected_result"]}
                        for t in directive["ready_tasks"]
                    ]
                    arguments = {"tasks": tasks, "progress_checklist_outcome": "two"}
                else:
                    arguments = confirm(index)
                directives[index] = await answer(
                    session,
                    directive,
                    **arguments,
                )
        assert all(d["completed"] for d in directives)
        assert len({d["processId"] for d in directives}) == 20


async def test_two_clients_racing_on_one_attempt_id(tmp_path: Path) -> None:
    async with serve(tmp_path) as first, serve(tmp_path) as second:
        directive = await begin(first, workflowId="todo-list", tasks=READY[1:])
        process = directive["processId"]
        _ready, directive = await pass_ready_list(first, directive)
        outcomes: list[bool] = []

        async def race(session: ClientSession) -> None:
            result = await session.call_tool(
                "step", {"processId": process, "attemptId": directive["attemptId"], **confirm(1)}
            )
            outcomes.append(not result.is_error)

        async with anyio.create_task_group() as group:
            group.start_soon(race, first)
            group.start_soon(race, second)
        assert sorted(outcomes) == [False, True]
        card = await call(second, "status", processId=process)
        assert card["work"]["role"] == "Task 2/2"


async def test_a_broken_workflow_file_does_not_stop_the_others(tmp_path: Path) -> None:
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "good.todoflow").write_text('workflow good "Good" {\n    regular a "A" {\n    }\n}\n')
    (flows / "bad.todoflow").write_text(
        'workflow bad "Bad" {\n    regular a "A" {\n        sucess "x"\n    }\n}\n'
    )
    shutil.copytree(FIXTURES / "legacy" / "mixed", flows / "legacy")  # a legacy nested plan.json
    async with serve(tmp_path, str(flows)) as session:
        runs = await call(session, "status")
        assert runs["workflows"] == ["good", "legacy", "todo-list"]
        legacy = await begin(session, workflowId="legacy")
        assert legacy["node"] == "intake" and legacy["step"]["id"] == "plan-a"
        message = await refused(
            session, "start", action="prepare", workflowId="bad", parentExecutionId="none"
        )
        assert "workflow `bad` does not compile" in message and "did you mean `success`?" in message
        directive = await begin(session, workflowId="good")
        assert directive["role"] == "Task 1/1"
        no_checklist = await refused(
            session, "start", action="prepare", workflowId="good", parentExecutionId="none", tasks=READY
        )
        assert "workflow `good` has no todo_task step to take a checklist" in no_checklist


async def test_an_orchestration_through_the_mcp_tools(tmp_path: Path) -> None:
    """Delegation, a failed prevalidation, a created todo, the todo tools and strict,
    unknown-field-refusing arguments, all through the official client (issue 13)."""
    flows = tmp_path / "flows"
    flows.mkdir()
    shutil.copy(ROOT / "examples" / "orchestrated.todoflow", flows)
    async with serve(tmp_path, str(flows)) as session:
        intake = await begin(session, workflowId="docs-release")
        ready = [
            {"action": t["action"], "expected_result": t["expected_result"]} for t in intake["ready_tasks"]
        ]
        turn = await answer(session, intake, tasks=ready, progress_checklist_outcome="three tasks")
        assert turn["todo_id"] == "todo_1" and [r["route_id"] for r in turn["routes"]] == ["build", "check"]
        assert turn["turns"] == {"used": 0, "allowed": 20} and turn["prompt"].startswith(
            "You are the orchestrator"
        )
        unknown = await refused(
            session,
            "step",
            processId=turn["processId"],
            attemptId=turn["attemptId"],
            evidence="e",
            progress_execution_outcome="o",
            mood="happy",
        )
        assert "`mood` is not part of a reply at work" in unknown
        delegate = {
            "next_action": "delegate",
            "selected_route_id": "build",
            "todo_id_to_execute": "todo_1",
            "instructions_to_sub_agent": "Build the site into site/.",
        }
        sub = await answer(session, turn, **delegate)
        assert sub["node"] == "delegated" and sub["role"] == "Sub-agent build · Task 1/3"
        assert sub["delegation"]["sub_step"]["expected_files"] == ["site/index.html"]
        assert "Build the site into site/." in sub["prompt"] and "Record the release" not in sub["prompt"]
        back = await answer(session, sub, evidence="built", progress_execution_outcome="done")
        assert back["last_delegation"]["passed"] is False and back["node"] == "work"
        sub = await answer(session, back, **delegate)
        (tmp_path / "site").mkdir()
        (tmp_path / "site" / "index.html").write_text("<h1>docs</h1>")
        done = await call(
            session,
            "complete_todo",
            processId=sub["processId"],
            attemptId=sub["attemptId"],
            todo_id="todo_1",
            result="site built",
            evidence="site/index.html written",
        )
        assert done["role"] == "Task 2/3" and done["last_delegation"]["passed"] is True
        created = await call(
            session,
            "create_todo",
            processId=done["processId"],
            attemptId=done["attemptId"],
            title="Announce it",
            description="announcement.md exists",
        )
        assert created["total"] == 4
        strict = await refused(
            session,
            "update_todo",
            processId=created["processId"],
            attemptId=created["attemptId"],
            todo_id="todo_2",
            status=True,
        )
        assert "status" in strict and "nothing changed" in strict
        listed = await call(session, "list_todos", processId=created["processId"])
        assert [t["status"] for t in listed["todos"]] == ["completed", "in_progress", "pending", "pending"]
        assert listed["todos"][0]["assigned_agent"] == "build"
        one = await call(session, "get_todo", processId=created["processId"], todo_id="todo_4")
        assert one["todo"]["title"] == "Announce it"
        premature = await refused(
            session,
            "step",
            processId=created["processId"],
            attemptId=created["attemptId"],
            next_action="complete",
        )
        assert "3 of 4 todos are not confirmed yet" in premature


async def test_a_learn_code_step_through_the_mcp_tools(tmp_path: Path) -> None:
    """`fastPathOnly` on the start, the script's delegations answered by the client, the
    step refused to the client's orchestrator (issue 14)."""
    flows, learnings, workspace = tmp_path / "flows", tmp_path / "learnings", tmp_path
    flows.mkdir()
    shutil.copy(ROOT / "examples" / "fast-path.todoflow", flows)
    shutil.copytree(ROOT / "examples" / "learnings", learnings)
    async with serve(tmp_path, str(flows), "--learnings", str(learnings)) as session:
        directive = await begin(session, workflowId="convert", fastPathOnly=True)
        decision = {
            "next_action": "delegate",
            "selected_route_id": "convert",
            "todo_id_to_execute": "todo_1",
            "instructions_to_sub_agent": "Convert it.",
        }
        assert "nothing changed" in await refused(
            session, "step", processId=directive["processId"], attemptId=directive["attemptId"], **decision
        )
        for number, name in enumerate("abc", start=1):
            assert (directive["node"], directive["fastPath"]) == ("delegated", "running"), directive
            (workspace / "csv").mkdir(exist_ok=True)
            (workspace / "csv" / f"{name}.csv").write_text(f"id,name\n{number},{name}\n")
            (workspace / "converted.log").write_text("".join(f"{n}\n" for n in "abc"[:number]))
            directive = await answer(
                session, directive, evidence=f"csv/{name}.csv written", progress_execution_outcome="converted"
            )
        assert directive["completed"] is True
    journal = run_cli("log", directive["processId"], "--run-dir", str(tmp_path / "runs"), "--json")
    iterations = json.loads(journal.stdout)["steps"][0]["iterations"]
    entries = [(e["type"], e["by"]) for i in iterations for e in i["entries"]]
    assert [by for kind, by in entries if kind == "delegate"] == ["script"] * 3  # no orchestrator's
    assert ("fast_path_failed", "driver") not in entries


def test_a_line_that_is_not_a_message_gets_a_json_rpc_error_not_silence(tmp_path: Path) -> None:
    """The SDK's stdio transport drops an unreadable line, so the client waits forever;
    the server answers it with the JSON-RPC error it calls for (issue 11)."""
    import select
    import subprocess

    server = subprocess.Popen(
        [sys.executable, "-m", "todoflow", "serve", "--run-dir", str(tmp_path / "runs")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert server.stdin is not None and server.stdout is not None

    def exchange(line: bytes) -> dict[str, Any]:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(line + b"\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], 30)
        assert ready, f"no answer to {line!r}"
        return json.loads(server.stdout.readline())  # type: ignore[no-any-return]

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert "result" in exchange(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode()
        )
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        surrogate = exchange(
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"status","arguments":{"processId":"\\ud800"}}}'
        )
        assert surrogate["id"] == 2 and surrogate["error"]["code"] == -32700
        broken = exchange(b'{"jsonrpc":"2.0","id":3,"method": nonsense')
        assert broken["id"] is None and broken["error"]["code"] == -32700
        invalid = exchange(b'{"jsonrpc":"2.0","id":4}')
        assert invalid["id"] == 4 and invalid["error"]["code"] == -32600
        assert "result" in exchange(b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}')  # the server goes on
    finally:
        server.kill()
        server.communicate()  # waits, and closes its pipes
