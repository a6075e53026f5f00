"""`step` round trips over Streamable HTTP (`serve --http`) against stdio (`serve`), in one
run, in interleaved rounds, each pair through two kinds of client:

- the official clients: `mcp.client.streamable_http` against the SDK's stdio client,
  what a user of the SDK sees (issue 23's target: HTTP within 1.5x of stdio);
- raw JSON-RPC clients: one keep-alive `http.client` connection POSTing `tools/call`
  with the headers the transport asks for, against a line written to the server's stdin
  and one read from its stdout. Their ratio is the servers' own, without a client
  library's cost.

Each of the four has a server process of its own and confirms the tasks of its own
todo-list run, one call of each in turn (the order rotated at every call), so a slow
spell of the machine falls on all four alike. Beside the round trips: the client's CPU
per call (`time.process_time` of this process, where the clients run), and the server's,
on its event loop (the main thread: the transport and the protocol) and on its worker
threads (the tool itself, a `step` of the engine), from /proc's per-thread schedstat.

    .venv/bin/python -m bench.mcp_http [ROUNDS] [CALLS]
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.measure import Figure, report
from bench.scratch import scratch

SERVE = [sys.executable, "-m", "todoflow", "serve"]
ROUNDS = 7
CALLS = 14  # confirmations of each client a round: a run holds at most 100 tasks
PROTOCOL = "2025-11-25"  # the version the official client settles on at `initialize`

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@asynccontextmanager
async def over_stdio(runs: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--run-dir", str(runs)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


class Served(NamedTuple):
    """A server process: its URL, its pid, and its stderr (the access log) in a file."""

    url: str
    pid: int
    stderr: Path

    def log(self) -> list[str]:
        """The lines of its stderr so far."""
        return self.stderr.read_text(encoding="utf-8", errors="replace").splitlines()


@contextmanager
def served(folder: Path, *options: str, workers: int = 1) -> Iterator[Served]:
    """A `todoflow serve --http 127.0.0.1:0` program with `options` (one process unless
    `workers` says more), its stderr in a file of `folder` (no pipe to drain: no thread of
    this process reads it while it measures)."""
    stderr = folder / f"serve-{time.monotonic_ns()}.log"
    address = ["--http", "127.0.0.1:0", "--workers", str(workers)]
    with stderr.open("wb") as out:
        server = subprocess.Popen([*SERVE, *options, *address], stderr=out)
    try:
        yield Served(_url(server, stderr), server.pid, stderr)
    finally:
        server.terminate()
        server.wait()


def _url(server: subprocess.Popen[bytes], stderr: Path) -> str:
    """The URL the server prints once it listens."""
    while (found := re.search(r"MCP over HTTP at (\S+)", stderr.read_text(errors="replace"))) is None:
        assert server.poll() is None, f"the HTTP server did not start: {stderr.read_text(errors='replace')}"
        time.sleep(0.05)  # polling a file the server writes: nothing to wait on instead
    return found.group(1)


@asynccontextmanager
async def session_at(url: str) -> AsyncIterator[ClientSession]:
    """The official client's session with a server over Streamable HTTP."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def calling(sessions: Sequence[ClientSession], pick: random.Random | None = None) -> Call:
    """A tool call through one of `sessions`, picked at random by `pick` (default: the first),
    its structured result."""

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        session = pick.choice(sessions) if pick else sessions[0]
        result = await session.call_tool(tool, arguments)
        assert not result.is_error and result.structured_content is not None, result.content
        return result.structured_content

    return call


async def walk(call: Call, steps: int) -> Callable[[], Awaitable[float]]:
    """A run of `steps` tasks past its intake; each call of the result confirms one, timed."""
    ready = [{"action": f"Task {i}", "expected_result": f"Task {i} checked"} for i in range(steps)]
    start = {"action": "prepare", "workflowId": "todo-list", "parentExecutionId": "bench", "tasks": ready}
    prepared = await call("start", start)
    directive = await call("start", {"action": "execute", "startAttemptId": prepared["startAttemptId"]})
    at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
    directive = await call("step", {**at, "tasks": ready, "progress_checklist_outcome": "ready"})

    async def confirm() -> float:
        nonlocal directive
        start = time.perf_counter()
        at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
        directive = await call("step", {**at, "evidence": "checked", "progress_execution_outcome": "done"})
        return time.perf_counter() - start

    return confirm


def rpc_request(request_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
    params = {"name": tool, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


def rpc_result(answer: bytes, request_id: int) -> dict[str, Any]:
    message = json.loads(answer)
    assert message.get("id") == request_id and "result" in message, message
    result: dict[str, Any] = message["result"]
    assert not result.get("isError") and "structuredContent" in result, result
    return dict(result["structuredContent"])


HEADERS = {  # what the transport asks of a POST; the version, what `initialize` settled
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL,
}


class RawHttp:
    """`tools/call` as one POST on a keep-alive connection: no client library."""

    def __init__(self, url: str) -> None:
        where = urlsplit(url)
        self.path, self.sent = where.path, 0
        self.connection = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        self.connection.request("POST", self.path, rpc_request(self.sent, tool, arguments), HEADERS)
        answer = self.connection.getresponse()
        body = answer.read()
        assert answer.status == 200, (answer.status, body)
        return rpc_result(body, self.sent)


class RawStdio:
    """`tools/call` as a line written to the server's stdin and the answer's line read from
    its stdout, after the `initialize` handshake stdio asks for."""

    def __init__(self, runs: Path) -> None:
        self.server = subprocess.Popen(
            [*SERVE, "--run-dir", str(runs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.sent = 0
        hello = {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        self._send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        assert json.loads(self._line()).get("id") == 0
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(json.dumps(message).encode() + b"\n")
        self.server.stdin.flush()

    def _line(self) -> bytes:
        assert self.server.stdout is not None
        line = self.server.stdout.readline()
        assert line, "the stdio server ended"
        return line

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        assert self.server.stdin is not None
        self.server.stdin.write(rpc_request(self.sent, tool, arguments) + b"\n")
        self.server.stdin.flush()
        return rpc_result(self._line(), self.sent)

    def close(self) -> None:
        assert self.server.stdin is not None
        self.server.stdin.close()  # its end of stdio: the server closes its runs and exits
        self.server.wait()


def thread_cpu(pid: int) -> tuple[float, float]:
    """The CPU seconds a process's main thread and its other threads have run so far
    (/proc's schedstat, in nanoseconds: finer than the clock ticks of /proc/PID/stat)."""
    main = others = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
        if task.name == str(pid):
            main = ran
        else:
            others += ran
    return main, others


def children() -> set[int]:
    """The pids of this process's children."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found |= {int(pid) for pid in (task / "children").read_text().split()}
    return found


class Client(NamedTuple):
    """One of the four: what it is, its server's pid, and a confirmation of its run."""

    name: str
    pid: int
    confirm: Callable[[], Awaitable[float]]


class Timed(NamedTuple):
    """One round of one client, per call: the round trip, the client's CPU, the server's
    CPU on its event loop and on its other threads (seconds, medians or means)."""

    trip: float
    client: float
    loop: float
    workers: float


async def _round(clients: Sequence[Client], calls: int, turn: int) -> dict[str, Timed]:
    trips: dict[str, list[float]] = {client.name: [] for client in clients}
    cpus: dict[str, list[float]] = {client.name: [] for client in clients}
    before = {client.name: thread_cpu(client.pid) for client in clients}
    for call in range(calls):
        shift = (turn + call) % len(clients)
        for client in [*clients[shift:], *clients[:shift]]:
            cpu = time.process_time()
            trips[client.name].append(await client.confirm())
            cpus[client.name].append(time.process_time() - cpu)
    out = {}
    for client in clients:
        loop, workers = (b - a for a, b in zip(before[client.name], thread_cpu(client.pid), strict=True))
        trip, cpu = statistics.median(trips[client.name]), statistics.median(cpus[client.name])
        out[client.name] = Timed(trip, cpu, loop / calls, workers / calls)
    return out


async def _official(stack: AsyncExitStack, folder: Path, steps: int) -> list[Client]:
    known = children()
    stdio = await stack.enter_async_context(over_stdio(folder / "sdk-stdio"))
    (stdio_pid,) = children() - known
    server = stack.enter_context(served(folder, "--run-dir", str(folder / "sdk-http")))
    http = await stack.enter_async_context(session_at(server.url))
    return [
        Client("sdk stdio", stdio_pid, await walk(calling([stdio]), steps)),
        Client("sdk http", server.pid, await walk(calling([http]), steps)),
    ]


async def _raw(stack: AsyncExitStack, folder: Path, steps: int) -> list[Client]:
    stdio = RawStdio(folder / "raw-stdio")
    stack.callback(stdio.close)
    server = stack.enter_context(served(folder, "--run-dir", str(folder / "raw-http")))
    http = RawHttp(server.url)
    stack.callback(http.connection.close)
    return [
        Client("raw stdio", stdio.server.pid, await walk(stdio.call, steps)),
        Client("raw http", server.pid, await walk(http.call, steps)),
    ]


async def measure(rounds: int, calls: int) -> list[dict[str, Timed]]:
    """`rounds` rounds of `calls` confirmations through each of the four clients."""
    assert rounds * calls <= 100, "a run holds at most 100 tasks: fewer rounds or calls"
    with ExitStack() as folders:
        folder = folders.enter_context(scratch())
        async with AsyncExitStack() as stack:
            clients = [
                *await _official(stack, folder, rounds * calls),
                *await _raw(stack, folder, rounds * calls),
            ]
            for client in clients:  # a first call each: its worker thread started, its plan read
                await client.confirm()
            return [await _round(clients, calls - 1 if turn == 0 else calls, turn) for turn in range(rounds)]


def figures(measured: list[dict[str, Timed]]) -> list[Figure]:
    pairs = [
        ("`step` round trip, official clients", "sdk", "trip", "<= 1.5"),
        ("`step` round trip, raw JSON-RPC clients (the servers' own)", "raw", "trip", ""),
        ("client CPU per call, official clients", "sdk", "client", ""),
        ("client CPU per call, raw clients", "raw", "client", ""),
        ("server CPU per call on its event loop (raw clients)", "raw", "loop", ""),
        ("server CPU per call on its worker threads (raw clients)", "raw", "workers", ""),
    ]
    made = []
    for name, kind, field, target in pairs:
        figure = Figure(f"{name}: HTTP", "stdio, same rounds", target=target, unit="ms")
        for round_ in measured:
            figure.add(getattr(round_[f"{kind} http"], field), getattr(round_[f"{kind} stdio"], field))
        made.append(figure)
    return made


def main(rounds: int = ROUNDS, calls: int = CALLS) -> list[Figure]:
    measured = anyio.run(measure, rounds, calls)
    made = figures(measured)
    report(f"mcp over HTTP ({calls} calls of each client a round)", made, rounds)
    for name in measured[0]:
        share = {
            field: statistics.median(getattr(r[name], field) for r in measured) for field in Timed._fields
        }
        print(f"    {name}: " + ", ".join(f"{field} {value * 1000:.2f} ms" for field, value in share.items()))
    return made


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
