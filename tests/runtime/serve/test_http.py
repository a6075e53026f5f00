"""`todoflow serve --http`: real server processes on loopback, driven by the official MCP
client's Streamable HTTP transport (`mcp.client.streamable_http`) and by plain HTTP for
what sits around it: tokens, health, bounds, the access log, SIGTERM (issue 23)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ...conftest import ROOT
from .test_mcp import READY, answer, begin, call, confirm, pass_ready_list, refused

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
TOKEN = "t0ken-" + "x" * 26
SERVED = re.compile(r"MCP over HTTP at (http://\S+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Server:
    """One `todoflow serve --http 127.0.0.1:0` process, its URL and its stderr lines."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, lines: list[str]) -> None:
        self.process, self.url, self.lines = process, url, lines
        self.base = url.rsplit("/", 1)[0]


@contextmanager
def http_server(folder: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    process = subprocess.Popen(
        [sys.executable, "-m", "todoflow", "serve", "--http", "127.0.0.1:0", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:  # stderr drained all along: a full pipe would stop the server
        for line in process.stderr or ():
            lines.append(line.decode())
            if SERVED.search(lines[-1]):
                started.set()
        started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started.wait(120)
    found = [m.group(1) for line in lines if (m := SERVED.search(line))]
    try:
        assert found, f"the server did not start: {''.join(lines)}"
        yield Server(process, found[0], lines)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        reader.join(5)
        if process.stderr is not None:
            process.stderr.close()


@asynccontextmanager
async def client(url: str, token: str | None = TOKEN) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _token_file(folder: Path) -> str:
    file = folder / "tokens"
    file.write_text(f"# the team's tokens\n{TOKEN}\nanother-token-of-32-characters-x\n")
    return str(file)


async def test_a_whole_run_over_http_with_the_tools_of_stdio(tmp_path: Path) -> None:
    with http_server(tmp_path, "--run-dir", "runs", "--token-file", _token_file(tmp_path)) as server:
        async with client(server.url) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == {"start", "step", "status", "create_todo", "update_todo"} | {
                "complete_todo",
                "list_todos",
                "get_todo",
            }
            directive = await begin(session, workflowId="todo-list", tasks=READY)
            ready, directive = await pass_ready_list(session, directive)
        for n in range(1, len(ready) + 1):  # a new connection for every call: no session to keep
            async with client(server.url) as session:
                directive = await answer(session, directive, **confirm(n))
        assert directive["completed"] is True
        async with client(server.url) as session:
            prepare = {"action": "prepare", "workflowId": "todo-list", "parentExecutionId": "none"}
            nul = await refused(session, "start", **prepare, workspace="\0")
            assert "workspace contains a NUL character" in nul
            listed = await call(session, "status")
        assert [run["status"] for run in listed["runs"]] == ["complete"]
    log = "".join(server.lines)
    assert TOKEN not in log and "Write release notes" not in log  # neither tokens nor arguments
    assert re.search(rf"POST /mcp tools/call step {directive['processId']} 200 ", log)


async def test_without_a_valid_token_every_call_is_401_and_changes_nothing(tmp_path: Path) -> None:
    with http_server(tmp_path, "--run-dir", "runs", env={"TODOFLOW_SERVE_TOKEN": TOKEN}) as server:
        start = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "start", "arguments": {"action": "prepare", "workflowId": "todo-list"}},
        }
        accept = {"accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as http:
            for given, error in [({}, ""), ({"authorization": "Bearer wrong"}, ', error="invalid_token"')]:
                reply = await http.post(server.url, json=start, headers=accept | given)
                assert reply.status_code == 401
                assert reply.headers["www-authenticate"] == f'Bearer realm="todoflow"{error}'
            health = await http.get(f"{server.base}/healthz")
            ready = await http.get(f"{server.base}/readyz")
            assert (health.status_code, health.json(), ready.status_code, ready.json()) == (
                200,
                {"status": "ok"},
                200,
                {"status": "ready"},
            )
            token = {"authorization": f"Bearer {TOKEN}"}
            good = await http.post(server.url, json=start, headers=accept | token)
            assert good.status_code == 200 and "startAttemptId" in good.text
        assert len(os.listdir(tmp_path / "runs" / ".starts")) == 1  # the one start with the token
        with pytest.raises(BaseExceptionGroup) as caught:  # the official client, refused as well
            async with client(server.url, token=None):
                pass
        assert "Server returned an error response" in str(_leaves(caught.value))
    # refused on its headers alone: the body never read, so the log cannot even name the method
    assert len(re.findall(r"POST /mcp - - - 401 ", "".join(server.lines))) == 3
    assert TOKEN not in "".join(server.lines)


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _leaves(inner)]
    return [group]


async def test_readyz_says_503_while_the_store_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with http_server(tmp_path, "--run-dir", "file/runs") as server:
        async with httpx2.AsyncClient() as http:
            ready = await http.get(f"{server.base}/readyz")
            assert (ready.status_code, ready.json()) == (503, {"status": "not ready"})
            assert (await http.get(f"{server.base}/healthz")).status_code == 200
            too_big = await http.post(server.url, content=b"{" + b" " * (1024 * 1024) + b"}")
            assert too_big.status_code == 413
        async with client(server.url, token=None) as session:
            said = await refused(session, "start", action="prepare", workflowId="todo-list")
            assert said.endswith("cannot prepare a start in file/runs/.starts: Not a directory")
    assert "not ready: cannot write run folders in file/runs" in "".join(server.lines)


def test_a_public_address_without_a_token_is_refused_at_start(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "todoflow", "serve", "--http", "0.0.0.0:0"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TODOFLOW_SERVE_TOKEN": ""},
        timeout=60,
    )
    assert refused.returncode == 1
    assert "refusing to serve 0.0.0.0 without a token" in refused.stderr
    assert "Traceback" not in refused.stderr


async def test_sigterm_answers_the_call_in_flight_then_exits_0(tmp_path: Path) -> None:
    """A learn_code script that takes 3 s to delegate holds `execute` in flight; SIGTERM
    then drains: the call gets its delegation, and the server exits 0."""
    flows, learnings = tmp_path / "flows", tmp_path / "learnings"
    flows.mkdir()
    shutil.copy(ROOT / "examples" / "fast-path.todoflow", flows)
    shutil.copytree(ROOT / "examples" / "learnings", learnings)
    script = learnings / "convert-all" / "main.py"
    script.write_text("import time\ntime.sleep(3)\n" + script.read_text())
    options = ("--run-dir", "runs", str(flows), "--learnings", str(learnings))
    with http_server(tmp_path, *options, "--token-file", _token_file(tmp_path)) as server:
        async with client(server.url) as session:
            prepared = await call(session, "start", action="prepare", workflowId="convert")
            answered: dict[str, Any] = {}

            async def execute() -> None:
                arguments = {"action": "execute", "startAttemptId": prepared["startAttemptId"]}
                answered.update(await call(session, "start", **arguments))

            async with anyio.create_task_group() as group:
                group.start_soon(execute)
                await anyio.sleep(1)
                server.process.send_signal(signal.SIGTERM)
        assert (answered["node"], answered["fastPath"]) == ("delegated", "running")
        assert server.process.wait(timeout=40) == 0
