"""Scale-out with the PostgreSQL store, through real `todoflow serve` processes and the
official MCP client: instances share no state, so clients switch between them at random;
racing replies resolve to one winner; the database server killed in immediate mode loses
no acknowledged step, whether it is back within a call's wait for a connection or not; a
`serve` killed mid-step leaves no partial step behind. A client sends a call again after
exactly two answers: a clear "cannot reach" error (nothing changed), and a start that was
executed but whose answer was lost (its run's directive is then asked with `status`)."""

from __future__ import annotations

import os
import random
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.types import CONNECTION_CLOSED

from todoflow.runtime import process
from todoflow.runtime.store.base import runs_at
from todoflow.runtime.store.postgres import CONNECT_TIMEOUT

from ...conftest import ROOT
from ...support.postgres import Cluster

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
TASKS = [{"action": f"Task {n}", "expected_result": f"task {n} checked"} for n in (1, 2, 3)]
STEPS = 1 + len(TASKS)  # the intake and a confirmation per task
ANSWER_WITHIN = 60  # seconds: a call waits at most 10 s for a connection, and fails then
# What a call answers when it cannot reach the database within its bound: a clear error,
# nothing changed (a refusal, or any other error, fails the test).
UNAVAILABLE = re.compile(r"^Error executing tool \w+: cannot reach postgresql://\S+: ")
# A start whose run was made, its answer lost (a server killed, the database gone after the commit).
EXECUTED = re.compile(r"startAttemptId `start-\w+` was executed already \(process `([^`]+)`\)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Instance:
    """One `todoflow serve --store URL`, its session and its pid."""

    def __init__(self, session: ClientSession, pid_file: Path) -> None:
        self.session, self.pid_file = session, pid_file
        self.alive = True

    @property
    def pid(self) -> int:
        return int(self.pid_file.read_text())


@asynccontextmanager
async def instances(tmp_path: Path, url: str, count: int) -> AsyncIterator[list[Instance]]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    async with AsyncExitStack() as stack:
        made = []
        for n in range(count):
            pid_file = tmp_path / f"serve-{n}.pid"
            code = (
                "import os, sys; from pathlib import Path; "
                f"Path({str(pid_file)!r}).write_text(str(os.getpid())); "
                "from todoflow.cli import main; sys.exit(main(sys.argv[1:]))"
            )
            params = StdioServerParameters(
                command=sys.executable,
                args=["-c", code, "serve", "--store", url, "--workspace", str(workspace)],
                cwd=str(tmp_path),
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            made.append(Instance(session, pid_file))
        yield made


class Client:
    """An MCP client that sends each call to an instance picked at random, and after a
    failure (a server down, a database down) sends the same call again, to any instance."""

    def __init__(self, name: str, servers: list[Instance], seed: int, racing: bool = False) -> None:
        self.name, self.servers, self.rng, self.racing = name, servers, random.Random(seed), racing
        self.acked: dict[str, list[str]] = {}  # process -> the evidence of each step it was told happened
        self.replayed = self.retries = 0
        self.unavailable: list[str] = []  # the errors of calls that could not reach the database

    def pick(self, other_than: Instance | None = None) -> Instance:
        alive = [s for s in self.servers if s.alive and s is not other_than]
        return self.rng.choice(alive)

    async def raw(self, server: Instance, tool: str, arguments: dict[str, Any]) -> Any:
        try:
            with anyio.fail_after(ANSWER_WITHIN):
                return await server.session.call_tool(tool, arguments)
        except TimeoutError:
            raise AssertionError(f"{self.name}: {tool} had no answer within {ANSWER_WITHIN} s") from None

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        for _ in range(200):
            server = self.pick()
            try:
                result = await self.raw(server, tool, arguments)
            except MCPError as error:
                assert error.code == CONNECTION_CLOSED, error
                server.alive = False  # the instance went away mid-call: another one is asked
                self.retries += 1
                continue
            text = result.content[0].text if result.is_error and result.content else ""
            executed = EXECUTED.search(text)
            if executed:  # the start was made, its answer lost: the run's directive is asked for
                return dict((await self.call("status", processId=executed[1]))["directive"])
            if result.is_error:
                assert UNAVAILABLE.search(text), f"{self.name}: {tool}: {text}"
                self.unavailable.append(text)
                await anyio.sleep(0.1)  # the same call again, shortly
                continue
            assert result.structured_content is not None
            found: dict[str, Any] = result.structured_content
            return found
        raise AssertionError(f"{self.name}: {tool} never succeeded ({self.retries} calls retried in all)")

    async def step(self, directive: dict[str, Any], **reply: Any) -> dict[str, Any]:
        pid = directive["processId"]
        answer = await self.call("step", processId=pid, attemptId=directive["attemptId"], **reply)
        self.replayed += bool(answer.get("replayed"))
        self.acked.setdefault(pid, []).append(reply.get("evidence", ""))
        return answer

    async def begin(self) -> dict[str, Any]:
        prepared = await self.call(
            "start", action="prepare", workflowId="todo-list", parentExecutionId=self.name, tasks=TASKS
        )
        directive = await self.call("start", action="execute", startAttemptId=prepared["startAttemptId"])
        return await self.step(directive, tasks=TASKS, progress_checklist_outcome="3 tasks")

    async def walk(self, directive: dict[str, Any], races: list[int]) -> None:
        for n in range(1, len(TASKS) + 1):
            pid = directive["processId"]
            if self.racing and self.rng.random() < 0.3:
                directive = await self.race(directive, n, races)
                continue
            evidence = f"{pid} task {n} by {self.name}"
            directive = await self.step(directive, evidence=evidence, progress_execution_outcome="ok")
        assert directive["completed"] is True

    async def race(self, directive: dict[str, Any], n: int, races: list[int]) -> dict[str, Any]:
        """Two different replies with one attempt id, on two instances at once: one wins."""
        pid, first = directive["processId"], self.pick()
        servers = [first, self.pick(other_than=first)]
        results: list[Any] = [None, None]

        async def send(i: int) -> None:
            evidence = f"{pid} task {n} by {self.name} racer {i}"
            arguments = {"processId": pid, "attemptId": directive["attemptId"], "evidence": evidence}
            results[i] = await self.raw(servers[i], "step", arguments | {"progress_execution_outcome": "ok"})

        async with anyio.create_task_group() as group:
            group.start_soon(send, 0)
            group.start_soon(send, 1)
        won = [i for i, result in enumerate(results) if not result.is_error]
        assert len(won) == 1, [r.content[0].text for r in results if r.is_error]
        lost = results[1 - won[0]]
        loser = lost.content[0].text  # the winner's step was the last: the run is complete
        assert "stale or used" in loser or (n == len(TASKS) and "the run is complete" in loser), loser
        races.append(1)
        self.acked.setdefault(pid, []).append(f"{pid} task {n} by {self.name} racer {won[0]}")
        answer: dict[str, Any] = results[won[0]].structured_content
        return answer


async def _load(clients: list[Client], processes: int, races: list[int]) -> None:
    async def work(client: Client, count: int) -> None:
        for _ in range(count):
            await client.walk(await client.begin(), races)

    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(work, client, processes // len(clients))


def _check_journals(url: str, clients: list[Client]) -> None:
    """Every process: its journal gap-free, complete, and holding each acknowledged step
    exactly once (the intake, then the confirmations' evidence in order)."""
    runs = runs_at(url)
    acked = {pid: steps for client in clients for pid, steps in client.acked.items()}
    listed = dict(runs.metas())
    assert set(listed) == set(acked)
    for pid, steps in acked.items():
        engine, store = process.open_process(runs, pid)
        entries = store.entries()
        assert [e.seq for e in entries] == list(range(1, STEPS + 1)), pid
        assert [getattr(e, "evidence", "") for e in entries] == steps, pid
        assert engine.directive().completed
        engine.close()


async def test_four_instances_and_eight_clients_over_two_hundred_processes(
    tmp_path: Path, pg_url: str
) -> None:
    races: list[int] = []
    async with instances(tmp_path, pg_url, 4) as servers:
        clients = [Client(f"client-{n}", servers, seed=n, racing=True) for n in range(8)]
        await _load(clients, 200, races)
    assert len(races) > 50  # every race had exactly one winner (asserted as it ran)
    assert sum(len(c.acked) for c in clients) == 200
    _check_journals(pg_url, clients)


@pytest.mark.parametrize("down", [1.0, 2.0 * CONNECT_TIMEOUT], ids=["down-1s", "down-past-the-bound"])
async def test_the_database_killed_in_immediate_mode_loses_no_acknowledged_step(
    tmp_path: Path, pg_url: str, pg_cluster: Cluster, down: float
) -> None:
    """Down briefly, calls wait for it; down longer than a call waits for a connection,
    calls fail with a clear error that changes nothing, and are sent again."""
    races: list[int] = []
    async with instances(tmp_path, pg_url, 2) as servers:
        clients = [Client(f"client-{n}", servers, seed=n) for n in range(4)]

        at_crash: list[int] = []

        def acked() -> int:
            return sum(len(steps) for c in clients for steps in c.acked.values())

        async def crash() -> None:
            while acked() < 40 * STEPS // 3:  # a third of the load acknowledged: mid-load
                await anyio.sleep(0.01)
            at_crash.append(acked())
            await anyio.to_thread.run_sync(pg_cluster.crash)
            await anyio.sleep(down)  # the database down this long
            await anyio.to_thread.run_sync(pg_cluster.restart)

        async with anyio.create_task_group() as group:
            group.start_soon(_load, clients, 40, races)
            group.start_soon(crash)
    assert 0 < at_crash[0] < acked() == 40 * STEPS  # the crash came mid-load; calls waited or were retried
    if down > CONNECT_TIMEOUT:
        assert any(client.unavailable for client in clients)  # calls failed within their bound
    _check_journals(pg_url, clients)  # acknowledged steps all there, none twice


async def test_a_serve_instance_killed_mid_step_leaves_no_partial_step(tmp_path: Path, pg_url: str) -> None:
    races: list[int] = []
    async with instances(tmp_path, pg_url, 3) as servers:
        clients = [Client(f"client-{n}", servers, seed=n) for n in range(4)]

        async def kill() -> None:
            while sum(len(steps) for c in clients for steps in c.acked.values()) < 40 * STEPS // 3:
                await anyio.sleep(0.01)
            victim = servers[0]
            victim.alive = False
            os.kill(victim.pid, signal.SIGKILL)

        async with anyio.create_task_group() as group:
            group.start_soon(_load, clients, 40, races)
            group.start_soon(kill)
    _check_journals(pg_url, clients)
