"""`serve --http --store postgresql://…` instances over one database, driven by the
official MCP client, which changes instance on every call: no session lives in any, a
race of two different replies through two instances has one winner, three instances
under eight clients lose no acknowledged step when one is SIGKILLed mid-load, and
/readyz follows the database down and back up (issue 23)."""

from __future__ import annotations

import random
import re
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


class Caller:
    """A client that sends every call to an instance picked at random, over a connection of
    its own, and sends it again to another when the instance is gone."""

    def __init__(self, urls: list[str], dead: set[str], seed: int) -> None:
        self.urls, self.dead, self.rng = urls, dead, random.Random(seed)
        self.acked: list[str] = []

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        for _ in range(20):
            url = self.rng.choice([u for u in self.urls if u not in self.dead])
            try:
                async with client(url, token=None) as session:
                    result = await session.call_tool(tool, arguments)
            except Exception:  # the instance went away: any transport error, another is asked
                continue
            text = result.content[0].text if result.is_error and result.content else ""  # type: ignore[union-attr]
            executed = re.search(r"was executed already \(process `([^`]+)`\)", text)
            if executed:  # made, its answer lost with the instance: the run's directive is asked for
                return dict((await self.call("status", processId=executed[1]))["directive"])
            assert not result.is_error and result.structured_content is not None, text
            return result.structured_content
        raise AssertionError(f"{tool} never answered")

    async def run(self) -> str:
        tasks = [{"action": f"Task {n}", "expected_result": f"task {n} checked"} for n in (1, 2, 3)]
        prepared = await self.call("start", action="prepare", workflowId="todo-list", tasks=tasks)
        directive = await self.call("start", action="execute", startAttemptId=prepared["startAttemptId"])
        at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
        directive = await self.call("step", **at, tasks=tasks, progress_checklist_outcome="three")
        for n in (1, 2, 3):
            at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
            evidence = f"{directive['processId']} task {n} checked"
            directive = await self.call("step", **at, evidence=evidence, progress_execution_outcome="done")
            self.acked.append(evidence)
        assert directive["completed"] is True
        return str(directive["processId"])


async def test_three_instances_eight_clients_one_killed_mid_load(tmp_path: Path, pg_url: str) -> None:
    with ExitStack() as stack:
        one_process = ("--store", pg_url, "--workers", "1")  # its SIGKILL ends the instance outright
        servers = [stack.enter_context(http_server(tmp_path, *one_process)) for _ in range(3)]
        urls, dead = [s.url for s in servers], set[str]()
        callers = [Caller(urls, dead, seed) for seed in range(8)]
        finished: dict[str, Caller] = {}

        async def one(caller: Caller) -> None:
            finished[await caller.run()] = caller

        async def kill() -> None:
            while sum(len(c.acked) for c in callers) < 6:  # mid-load: a quarter of the steps acknowledged
                await anyio.sleep(0.05)
            dead.add(urls[0])
            servers[0].process.kill()

        async with anyio.create_task_group() as group:
            group.start_soon(kill)
            for caller in callers:
                group.start_soon(one, caller)
        assert servers[0].process.wait() == -9 and len(finished) == 8
    for pid, caller in finished.items():
        with process.open_process(pg_url, pid)[0] as engine:
            entries = engine.store.entries()
        assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))  # gap-free
        evidence = [entry.evidence for entry in entries if isinstance(entry, Confirm)]
        assert sorted(evidence) == sorted(caller.acked)  # every acknowledged step, each once
