"""Many runs stepped at once by one stdio server: the steps per second `RUNS` runs reach
when their calls go to one server at the same time (one client session, each run's calls
in order, the runs' calls concurrent), against one run stepped alone by the same server
in the same round; with a base commit, against the same `RUNS` runs in that commit's
server (its tree extracted into the scratch folder and served from there), the rounds
measuring one server after the other. Runs on the disk: each confirmation is durable.
Beside the figures: the CPU a step costs the client (this process) and each server, on
its event loop and on its worker threads.

    .venv/bin/python -m bench.mcp_many [ROUNDS [BASE_COMMIT]]
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from bench.mcp_http import children, thread_cpu
from bench.mcp_step import Call, base_tree, past_intake
from bench.measure import Figure, report, sync_latency
from bench.scratch import scratch

RUNS = 32
TASKS = 100  # a run's checklist: enough confirmations for every round
ROUNDS = 4
STEPS = 20  # confirmations per run and round, fewer when the rounds would outlast the checklist


class Run:
    """One todo-list run past its intake, and the directive its next step answers."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.directive: dict[str, Any] = {}

    async def begin(self) -> None:
        self.directive = await past_intake(self.call, TASKS)

    async def confirm(self, steps: int) -> None:
        for i in range(steps):
            self.directive = await self.call(
                "step",
                processId=self.directive["processId"],
                attemptId=self.directive["attemptId"],
                evidence=f"checked task {i}",
                progress_execution_outcome=f"task {i} done",
            )


async def rate(runs: list[Run], steps: int) -> float:
    """Steps per second of `runs` confirming `steps` each, all at once."""
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for run in runs:
            group.start_soon(run.confirm, steps)
    return len(runs) * steps / (time.perf_counter() - start)


class Cpu:
    """Where a step of the shared server goes: CPU ms per step of the client (this
    process), the server's event loop and its worker threads, per round."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rows: list[tuple[float, float, float]] = []

    async def measure(self, runs: list[Run], steps: int) -> float:
        client, (loop, workers) = time.process_time(), thread_cpu(self.pid)
        rated = await rate(runs, steps)
        after = thread_cpu(self.pid)
        per = 1e3 / (len(runs) * steps)
        self.rows.append(
            ((time.process_time() - client) * per, (after[0] - loop) * per, (after[1] - workers) * per)
        )
        return rated

    def line(self) -> str:
        medians = [statistics.median(column) for column in zip(*self.rows, strict=True)]
        return (
            "    CPU ms a step: client {:.2f}, server's event loop {:.2f}, its worker threads {:.2f}".format(
                *medians
            )
        )


class Server:
    """One stdio server (this commit's, or `base`'s tree) with `RUNS` runs and one more
    run to step alone, and where its CPU goes."""

    def __init__(self, name: str, call: Call, pid: int) -> None:
        self.name, self.cpu = name, Cpu(pid)
        self.many = [Run(call) for _ in range(RUNS)]
        self.single = Run(call)

    @classmethod
    async def start(cls, stack: contextlib.AsyncExitStack, runs: Path, tree: Path | None) -> Server:
        known = children()
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "bench.mcp_server", str(runs)],
            cwd=str(tree or Path.cwd()),
            env={**os.environ, "PYTHONPATH": str(tree)} if tree else None,
        )
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()

        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return result.structured_content

        server = cls("this commit" if tree is None else tree.name, call, *(children() - known))
        for run in [*server.many, server.single]:
            await run.begin()
        return server


async def rounds(count: int = ROUNDS, base: str | None = None) -> list[Figure]:
    """`count` rounds; with `base` (a commit), the same against that commit's server."""
    steps = min(STEPS, TASKS // count)
    shared = Figure(f"steps/s, {RUNS} runs in one stdio server", "1 run, the same server", unit="/s")
    figures = [shared]
    with scratch() as folder:
        async with contextlib.AsyncExitStack() as stack:
            ours = await Server.start(stack, folder / "ours", None)
            servers = [ours]
            if base is not None:
                theirs = await Server.start(stack, folder / "base", base_tree(base, folder))
                servers.append(theirs)
                against = Figure(
                    f"steps/s, {RUNS} runs in one stdio server",
                    f"the same, {base}",
                    target=">= 1.5",
                    unit="/s",
                )
                figures.append(against)
            for _ in range(count):
                rates = {}
                for server in servers:  # one after the other: each has the machine to itself
                    rates[server.name] = (
                        await server.cpu.measure(server.many, steps),
                        await rate([server.single], steps),
                    )
                sync = sync_latency(folder)
                shared.add(*rates[ours.name], sync)
                if base is not None:
                    against.add(rates[ours.name][0], rates[theirs.name][0], sync)
    report(f"mcp_many ({RUNS} runs x {steps} confirmations a round)", figures, count)
    for server in servers:
        print(f"{server.name}:{server.cpu.line()}")
    return figures


def main(count: int = ROUNDS, base: str | None = None) -> list[Figure]:
    return anyio.run(rounds, count, base)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS, sys.argv[2] if len(sys.argv) > 2 else None)
