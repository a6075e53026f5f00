"""Two `serve --http --store postgresql://…` instances over one database, driven by the
official MCP client, which changes instance on every call: no session lives in either, a
race of two different replies through the two has one winner, and /readyz follows the
database down and back up (issue 23)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from todoflow.runtime import process
from todoflow.runtime.entries import Confirm
from todoflow.runtime.store.base import runs_at

from ...support.postgres import Cluster
from .test_http import client, http_server
from .test_mcp import READY, begin, call, confirm

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _on(url: str, tool: str, **arguments: Any) -> dict[str, Any]:
    async with client(url, token=None) as session:
        return await call(session, tool, **arguments)


async def test_two_instances_one_run_any_instance_any_call(tmp_path: Path, pg_url: str) -> None:
    with ExitStack() as stack:
        urls = [stack.enter_context(http_server(tmp_path, "--store", pg_url)).url for _ in range(2)]
        async with client(urls[0], token=None) as session:
            directive = await begin(session, workflowId="todo-list", tasks=READY)
        ready = [{k: t[k] for k in ("action", "expected_result")} for t in directive["ready_tasks"]]
        pid = directive["processId"]
        step = {"processId": pid, "attemptId": directive["attemptId"]}
        directive = await _on(urls[1], "step", **step, tasks=ready, progress_checklist_outcome="3 tasks")
        # a race: two different replies to one attempt, through the two instances at once
        outcomes: list[str] = []

        async def reply(url: str, n: int) -> None:
            arguments = {"processId": pid, "attemptId": directive["attemptId"], **confirm(n)}
            async with client(url, token=None) as session:
                result = await session.call_tool("step", arguments)
            outcomes.append("refused" if result.is_error else "won")

        async with anyio.create_task_group() as group:
            group.start_soon(reply, urls[0], 1)
            group.start_soon(reply, urls[1], 101)
        assert sorted(outcomes) == ["refused", "won"]
        for n in (2, 3):  # the rest, each call on the other instance
            current = (await _on(urls[n % 2], "status", processId=pid))["directive"]
            arguments = {"processId": pid, "attemptId": current["attemptId"], **confirm(n)}
            directive = await _on(urls[(n + 1) % 2], "step", **arguments)
        assert directive["completed"] is True
    with process.open_process(pg_url, pid)[0] as engine:
        entries = engine.store.entries()
    assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))  # gap-free
    assert sum(isinstance(entry, Confirm) for entry in entries) == 3  # the race's loser left nothing


async def test_readyz_follows_the_database(tmp_path: Path, pg_url: str, pg_cluster: Cluster) -> None:
    with http_server(tmp_path, "--store", pg_url) as server:
        async with httpx2.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{server.base}/readyz")).status_code == 200
            await anyio.to_thread.run_sync(pg_cluster.crash)
            try:
                down = await http.get(f"{server.base}/readyz")
                assert (down.status_code, down.json()) == (503, {"status": "not ready"})
                assert (await http.get(f"{server.base}/healthz")).status_code == 200
            finally:
                await anyio.to_thread.run_sync(pg_cluster.restart)
            for _ in range(30):  # the pool replaces its connections within a few tries
                if (await http.get(f"{server.base}/readyz")).status_code == 200:
                    break
                await anyio.sleep(1)
            else:
                raise AssertionError("/readyz did not come back after the database did")
    assert "not ready" in "".join(server.lines)
    runs_at(pg_url).close()
