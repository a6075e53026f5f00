"""MCP round trip: a `step` (one confirmation, durable) through the official client and the
real server over stdio, against a no-op tool call on the same server, in one run.

Two servers run side by side, calls interleaved: one keeps its runs on the disk (the
figure a user sees, its `fdatasync` included: the sync latency is printed beside it) and
one in a tmpfs, where a sync costs next to nothing, so what a step adds to a call there
is todoflow's CPU on the server.

    .venv/bin/python -m bench.mcp_step
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from bench.measure import Figure, report, sync_latency
from bench.scratch import memory, scratch

TASKS = 100
ROUNDS = 5
Call = Callable[..., Awaitable[dict[str, Any]]]


async def past_intake(call: Call, tasks: int) -> dict[str, Any]:
    """A todo-list run started through `call` with a ready checklist of `tasks` tasks,
    taken in: the directive of its first confirmation."""
    ready = [{"action": f"Task {i}", "expected_result": f"Task {i} checked"} for i in range(tasks)]
    prepared = await call(
        "start", action="prepare", workflowId="todo-list", parentExecutionId="bench", tasks=ready
    )
    directive = await call("start", action="execute", startAttemptId=prepared["startAttemptId"])
    return await call(
        "step",
        processId=directive["processId"],
        attemptId=directive["attemptId"],
        tasks=ready,
        progress_checklist_outcome="ready",
    )


class Served:
    """One server and the run it steps: a `step` and a no-op, each timed."""

    def __init__(self, call: Call, figure: Figure, folder: Path, durable: bool) -> None:
        self.call, self.figure, self.folder, self.durable = call, figure, folder, durable
        self.steps: list[float] = []
        self.noops: list[float] = []
        self.directive: dict[str, Any] = {}

    async def begin(self) -> None:
        self.directive = await past_intake(self.call, TASKS)

    async def one(self, i: int) -> None:
        start = time.perf_counter()
        await self.call("noop")
        self.noops.append(time.perf_counter() - start)
        start = time.perf_counter()
        self.directive = await self.call(
            "step",
            processId=self.directive["processId"],
            attemptId=self.directive["attemptId"],
            evidence=f"checked task {i}",
            progress_execution_outcome=f"task {i} done",
        )
        self.steps.append(time.perf_counter() - start)

    def end_round(self) -> None:
        sync = sync_latency(self.folder) if self.durable else None
        self.figure.add(statistics.median(self.steps), statistics.median(self.noops), sync)
        self.steps, self.noops = [], []


async def _serve(stack: contextlib.AsyncExitStack, runs: Path) -> Call:
    params = StdioServerParameters(command=sys.executable, args=["-m", "bench.mcp_server", str(runs)])
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()

    async def call(tool: str, **arguments: Any) -> dict[str, Any]:
        result = await session.call_tool(tool, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content

    return call


async def rounds() -> list[Figure]:
    noop = "no-op tool call, same server"
    disk = Figure("`step` round trip (a durable confirmation)", noop, target="<= 1.3", unit="ms")
    tmpfs = Figure("the same, runs in a tmpfs (todoflow's CPU)", noop, target="<= 1.3", unit="ms")
    with scratch() as on_disk, memory() as in_memory:
        async with contextlib.AsyncExitStack() as stack:
            served = [Served(await _serve(stack, on_disk), disk, on_disk, durable=True)]
            if in_memory is None:
                print(
                    "no file system in memory (tmpfs; set TODOFLOW_BENCH_TMPFS): the tmpfs figure is left out"
                )
            else:
                served.append(Served(await _serve(stack, in_memory), tmpfs, in_memory, durable=False))
            for server in served:
                await server.begin()
            per_round = TASKS // ROUNDS
            for round_ in range(ROUNDS):
                for i in range(round_ * per_round, (round_ + 1) * per_round):  # interleaved
                    for server in served:
                        await server.one(i)
                for server in served:
                    server.end_round()
            assert all(server.directive["completed"] for server in served)
    figures = [server.figure for server in served]
    report(f"mcp ({TASKS // ROUNDS} calls of each a round)", figures, ROUNDS)
    return figures


def main() -> list[Figure]:
    return anyio.run(rounds)


if __name__ == "__main__":
    main()
