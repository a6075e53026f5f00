"""MCP resources and prompts of `todoflow serve`, through the official client over stdio:
listed, read and got as any client would, changing nothing (issue 27)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from ...conftest import FIXTURES
from .test_mcp import READY, answer, begin, confirm, pass_ready_list, serve

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def read(session: ClientSession, uri: str) -> tuple[str, str | None]:
    result = await session.read_resource(uri)
    content = result.contents[0]
    return getattr(content, "text", ""), content.mime_type


async def test_runs_and_workflows_as_resources(tmp_path: Path) -> None:
    async with serve(tmp_path) as session:
        directive = await begin(session, workflowId="todo-list", tasks=READY)
        ready, directive = await pass_ready_list(session, directive)
        for n in range(1, len(ready) + 1):
            directive = await answer(session, directive, **confirm(n))
        pid = directive["processId"]
        assert [str(r.uri) for r in (await session.list_resources()).resources] == ["todoflow://runs"]
        templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
        assert templates == {
            "todoflow://runs/{processId}",
            "todoflow://runs/{processId}/log",
            "todoflow://runs/{processId}/report",
            "todoflow://workflows/{workflowId}",
        }
        listed, kind = await read(session, "todoflow://runs")
        assert kind == "application/json" and json.loads(listed)["runs"][0]["processId"] == pid
        card, _ = await read(session, f"todoflow://runs/{pid}")
        assert json.loads(card)["status"] == "complete"
        log, kind = await read(session, f"todoflow://runs/{pid}/log")
        assert kind == "text/plain" and "Write release notes" in log
        report, kind = await read(session, f"todoflow://runs/{pid}/report")
        assert kind == "text/html" and report.lstrip().lower().startswith("<!doctype html")
        flow = json.loads((await read(session, "todoflow://workflows/todo-list"))[0])
        assert "workflow todo-list" in flow["source"] and flow["mermaid"].startswith("flowchart")
        with pytest.raises(MCPError, match="no run `nobody`"):
            await session.read_resource("todoflow://runs/nobody")
        with pytest.raises(MCPError, match="a process id is a plain name"):
            await session.read_resource("todoflow://runs/-x/log")
        with pytest.raises(MCPError):  # the SDK's own path safety, or ours: refused either way
            await session.read_resource("todoflow://runs/..%2Fx/log")


async def test_prompts_to_run_a_workflow_and_to_review_a_run(tmp_path: Path) -> None:
    async with serve(tmp_path, str(FIXTURES)) as session:
        assert {p.name for p in (await session.list_prompts()).prompts} == {"run_workflow", "review_run"}
        prompt = await session.get_prompt("run_workflow", {"workflowId": "todo-list", "goal": "Ship 2.0"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert prompt.messages[0].role == "user"
        assert "The goal: Ship 2.0" in text and '"workflowId": "todo-list"' in text and "`step`" in text
        directive = await begin(session, workflowId="todo-list", goal="Ship 2.0")
        review = await session.get_prompt("review_run", {"processId": directive["processId"]})
        said = review.messages[0].content.text  # type: ignore[union-attr]
        assert directive["processId"] in said and "## Log" in said and '"status": "running"' in said
        with pytest.raises(MCPError, match="no workflow `nothing`"):
            await session.get_prompt("run_workflow", {"workflowId": "nothing"})
