"""`step` round trips over Streamable HTTP (`serve --http`) against stdio (`serve`), one
server process of each, through the official client, in one run, interleaved.

    .venv/bin/python -m bench.mcp_http [STEPS]
"""

from __future__ import annotations

import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

SERVE = [sys.executable, "-m", "todoflow", "serve"]


@asynccontextmanager
async def over_stdio(runs: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--run-dir", str(runs)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


class Served(NamedTuple):
    """A server process: its URL, its pid, and its access log's lines so far."""

    url: str
    pid: int
    log: list[str]


@contextmanager
def served(*options: str) -> Iterator[Served]:
    """A `todoflow serve --http 127.0.0.1:0` process with `options`."""
    server = subprocess.Popen([*SERVE, *options, "--http", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    url = None
    while url is None:
        line = server.stderr.readline()
        assert line, "the HTTP server did not start"
        found = re.search(r"MCP over HTTP at (\S+)", line)
        url = found.group(1) if found else None
    log: list[str] = []
    drain = threading.Thread(target=lambda: log.extend(server.stderr or ()), daemon=True)
    drain.start()  # the access log read all along: a full pipe would stop the server
    try:
        yield Served(url, server.pid, log)
    finally:
        server.terminate()
        server.wait()


@asynccontextmanager
async def session_at(url: str) -> AsyncIterator[ClientSession]:
    """The official client's session with a server over Streamable HTTP."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def over_http(runs: Path) -> AsyncIterator[ClientSession]:
    with served("--run-dir", str(runs)) as server:
        async with session_at(server.url) as session:
            yield session


async def walk(
    sessions: Sequence[ClientSession], steps: int, pick: random.Random | None = None
) -> Callable[[], Awaitable[float]]:
    """A run of `steps` tasks past its intake; each call of the result confirms one, timed.
    Each call goes to one of `sessions`, picked at random by `pick` (default: the first)."""

    async def call(tool: str, **arguments: Any) -> dict[str, Any]:
        session = pick.choice(sessions) if pick else sessions[0]
        result = await session.call_tool(tool, arguments)
        assert not result.is_error and result.structured_content is not None, result.content
        return result.structured_content

    ready = [{"action": f"Task {i}", "expected_result": f"Task {i} checked"} for i in range(steps)]
    start = {"action": "prepare", "workflowId": "todo-list", "parentExecutionId": "bench", "tasks": ready}
    prepared = await call("start", **start)
    directive = await call("start", action="execute", startAttemptId=prepared["startAttemptId"])
    at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
    directive = await call("step", **at, tasks=ready, progress_checklist_outcome="ready")

    async def confirm() -> float:
        nonlocal directive
        start = time.perf_counter()
        at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
        directive = await call("step", **at, evidence="checked", progress_execution_outcome="done")
        return time.perf_counter() - start

    return confirm


async def main(steps: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        async with AsyncExitStack() as stack:
            stdio = await stack.enter_async_context(over_stdio(Path(scratch) / "stdio"))
            http = await stack.enter_async_context(over_http(Path(scratch) / "http"))
            by_stdio, by_http = await walk([stdio], steps), await walk([http], steps)
            timed: dict[str, list[float]] = {"stdio": [], "http": []}
            for _ in range(steps):  # interleaved: the machine's load falls on both alike
                timed["stdio"].append(await by_stdio())
                timed["http"].append(await by_http())
    stdio_ms, http_ms = (statistics.median(timed[k]) * 1000 for k in ("stdio", "http"))
    print(f"`step` round trip, median of {steps}: stdio {stdio_ms:.2f} ms, HTTP {http_ms:.2f} ms")
    print(f"HTTP / stdio: {http_ms / stdio_ms:.2f} (target <= 1.5)")


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 100)
