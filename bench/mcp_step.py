"""MCP round trip: a `step` (one confirmation, durable) through the official client and the
real server over stdio, against a no-op tool call on the same server, in one run.

Two servers run side by side, calls interleaved: one keeps its runs on the disk (the
figure a user sees, its `fdatasync` included: the sync latency is printed beside it) and
one in a tmpfs, where a sync costs next to nothing, so what a step adds to a call there
is todoflow's CPU on the server. With a base commit, two more servers, that commit's (its
tree extracted into the scratch folder and served from there), one on the disk and one
in a tmpfs, their calls interleaved with the others': a before and after in one spell.

    .venv/bin/python -m bench.mcp_step [BASE]
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
import tomllib
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


async def serve(stack: contextlib.AsyncExitStack, runs: Path, tree: Path | None = None) -> Call:
    """A call to a stdio server of this commit's (or of `tree`'s) keeping its runs in `runs`."""
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

    return call


def base_tree(commit: str, folder: Path) -> Path:
    """`commit`'s tree, importable as `todoflow` from its root: its sub-packages' folders
    linked in as its pyproject.toml maps them (the editable install maps this one's)."""
    tree = (folder / f"base-{commit}").resolve()
    tree.mkdir()
    archive = subprocess.run(["git", "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    mapped = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, where in mapped.items():
        if package != "todoflow":
            (tree / package.replace(".", "/")).symlink_to(tree / where, target_is_directory=True)
    return tree


async def _servers(
    stack: contextlib.AsyncExitStack, on_disk: Path, in_memory: Path | None, tree: Path | None
) -> list[Served]:
    """A server on the disk and one in a tmpfs (where there is one), of this commit or of `tree`'s."""
    noop = "no-op tool call, same server"
    of = "" if tree is None else f", {tree.name.removeprefix('base-')}'s server"
    disk = Figure(f"`step` round trip (a durable confirmation){of}", noop, target="<= 1.3", unit="ms")
    tmpfs = Figure(f"the same, runs in a tmpfs (todoflow's CPU){of}", noop, target="<= 1.3", unit="ms")
    name = "ours" if tree is None else "base"
    (on_disk / name).mkdir()
    served = [Served(await serve(stack, on_disk / name, tree), disk, on_disk, durable=True)]
    if in_memory is not None:
        (in_memory / name).mkdir()
        served.append(Served(await serve(stack, in_memory / name, tree), tmpfs, in_memory, durable=False))
    return served


async def rounds(base: str | None = None) -> list[Figure]:
    with scratch() as on_disk, memory() as in_memory:
        if in_memory is None:
            print("no file system in memory (tmpfs; set TODOFLOW_BENCH_TMPFS): the tmpfs figure is left out")
        async with contextlib.AsyncExitStack() as stack:
            served = await _servers(stack, on_disk, in_memory, None)
            if base is not None:
                served += await _servers(stack, on_disk, in_memory, base_tree(base, on_disk))
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


def main(base: str | None = None) -> list[Figure]:
    return anyio.run(rounds, base)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
