"""`todoflow serve --http --workers N`: N real worker processes on one address, driven by
plain HTTP clients, each call on a connection of its own (issue 24, item 4)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ...conftest import ROOT, run_cli, wait_until
from .test_http import Server, http_server
from .test_served_fast_path import converted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
TASKS = [{"action": f"Task {n}", "expected_result": f"Task {n} checked"} for n in range(1, 9)]
SERVING = re.compile(r"MCP over HTTP at \S+ \(worker (\d+)\)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _call(url: str, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    """One `tools/call` on a new connection: whether it was refused, and what it answered."""
    async with httpx2.AsyncClient(timeout=60) as http:
        return await _post(http, url, tool, **arguments)


async def _post(
    http: httpx2.AsyncClient, url: str, tool: str, **arguments: Any
) -> tuple[bool, dict[str, Any]]:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    reply = await http.post(url, json=request, headers={"accept": "application/json, text/event-stream"})
    result = reply.json()["result"]
    return result.get("isError", False), result.get("structuredContent") or {}


async def _step(url: str, directive: dict[str, Any], **reply: Any) -> tuple[bool, dict[str, Any]]:
    at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
    return await _call(url, "step", **at, **reply)


async def _twice(url: str, directive: dict[str, Any], **reply: Any) -> list[tuple[bool, dict[str, Any]]]:
    """The same reply sent twice at once, each on its own connection."""
    answers: list[tuple[bool, dict[str, Any]]] = []

    async def send() -> None:
        answers.append(await _step(url, directive, **reply))

    async with anyio.create_task_group() as group:
        group.start_soon(send)
        group.start_soon(send)
    return answers


def _pids(lines: list[str], pattern: str) -> set[str]:
    """The worker pids (the access log's last field) of the lines matching `pattern`."""
    return {line.split()[-1] for line in lines if re.search(pattern, line)}


async def test_two_workers_answer_on_one_address_and_step_one_run_exactly_once(tmp_path: Path) -> None:
    with http_server(tmp_path, "--run-dir", "runs", "--workers", "2") as server:
        assert "todoflow serve: starting 2 workers on http://127.0.0.1:" in "".join(server.lines)
        _, prepared = await _call(server.url, "start", action="prepare", workflowId="todo-list", tasks=TASKS)
        _, directive = await _call(
            server.url, "start", action="execute", startAttemptId=prepared["startAttemptId"]
        )
        ready = [{k: t[k] for k in ("action", "expected_result")} for t in directive["ready_tasks"]]
        _, directive = await _step(server.url, directive, tasks=ready, progress_checklist_outcome="ready")
        process_id = directive["processId"]
        for n in range(1, len(TASKS) + 1):  # each reply sent twice at once, through two connections
            answers = await _twice(
                server.url, directive, evidence=f"checked {n}", progress_execution_outcome="done"
            )
            applied = [answered for refused, answered in answers if not refused]
            assert len(applied) == 1, answers  # one applies; the other is refused as stale
            directive = applied[0]
        assert directive["completed"] is True
        for _ in range(100):  # both workers accept: bursts of connections until each has answered one
            if len(_pids(server.lines, rf"tools/call step {process_id} ")) > 1:
                break
            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(_call, server.url, "status")
        assert len(_pids(server.lines, r"POST /mcp tools/call ")) == 2
    journal = run_cli("log", process_id, "--run-dir", "runs", "--journal", cwd=tmp_path)
    kinds = [json.loads(line)["type"] for line in journal.stdout.splitlines()]
    assert kinds.count("confirm") == len(TASKS), journal.stdout


async def _on_worker_but(
    server: Server, pid: str, tool: str, **arguments: Any
) -> tuple[bool, dict[str, Any]]:
    """A call answered by a worker other than `pid`: a connection is tried with a `status`
    call until the access log says another worker took it, then the call goes on it."""
    for _ in range(200):
        async with httpx2.AsyncClient(timeout=60) as http:
            seen = len(server.lines)
            await _post(http, server.url, "status")
            if _logged(server, seen, "tools/call status") != pid:
                return await _post(http, server.url, tool, **arguments)
    raise AssertionError(f"no connection reached a worker other than {pid}")


def _logged(server: Server, seen: int, call: str) -> str:
    """The pid of the worker that logged `call` after line `seen` (the log line follows
    the answer: it is waited for). Calls here are one at a time."""
    wait_until(lambda: any(call in line for line in server.lines[seen:]), f"the access log of {call}")
    return next(line for line in server.lines[seen:] if call in line).split()[-1]


async def test_a_fast_path_run_by_one_worker_is_answered_through_the_other(tmp_path: Path) -> None:
    """learn_code over a run folder with two workers: the script runs on the worker that
    started the step; every answer reaches the other, which waits for the script's next
    delegation (the script's worker watches the run folder for the answer)."""
    (tmp_path / "flows").mkdir()
    shutil.copy(ROOT / "examples" / "fast-path.todoflow", tmp_path / "flows")
    shutil.copytree(ROOT / "examples" / "learnings", tmp_path / "learnings")
    options = ("--run-dir", "runs", "--learnings", "learnings", "flows", "--workers", "2")
    with http_server(tmp_path, *options) as server:
        _, prepared = await _call(server.url, "start", action="prepare", workflowId="convert")
        _logged(server, 0, "tools/call start")  # before the next call's lines are counted
        seen = len(server.lines)
        _, directive = await _call(
            server.url, "start", action="execute", startAttemptId=prepared["startAttemptId"]
        )
        script = _logged(server, seen, "tools/call start")  # the worker whose script runs
        for done in range(3):
            assert directive["node"] == "delegated" and directive["fastPath"] == "running", directive
            reply = converted(tmp_path, directive, done)
            at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
            seen = len(server.lines)
            refused, directive = await _on_worker_but(server, script, "step", **at, **reply)
            assert not refused, directive
            assert _logged(server, seen, "tools/call step") != script
        assert directive["completed"] is True and "fastPath" not in directive, directive
    journal = run_cli("log", directive["processId"], "--run-dir", "runs", "--journal", cwd=tmp_path)
    entries = [json.loads(line) for line in journal.stdout.splitlines()]
    assert [e.get("by") for e in entries if e["type"] == "delegate"] == ["script"] * 3
    assert not [e for e in entries if e["type"] == "fast_path_failed"], journal.stdout
    assert next(e for e in entries if e["type"] == "fast_path_started")["runner"].endswith(f":{script}")


async def test_a_killed_worker_is_started_again_and_sigterm_stops_them_all(tmp_path: Path) -> None:
    with http_server(tmp_path, "--run-dir", "runs", "--workers", "2") as server:
        wait_until(lambda: len(SERVING.findall("".join(server.lines))) == 2, "two workers serving")
        first, second = (int(pid) for pid in SERVING.findall("".join(server.lines)))
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: len(SERVING.findall("".join(server.lines))) == 3, "a worker started again")
        said = "".join(server.lines)
        assert f"worker {first} was killed by signal 9; starting another" in said
        third = int(SERVING.findall(said)[-1])
        async with httpx2.AsyncClient() as http:
            assert (await http.get(f"{server.base}/healthz")).status_code == 200
        before = len(server.lines)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 0
        for worker in (second, third):  # reaped by the parent before it exited
            with pytest.raises(ProcessLookupError):
                os.kill(worker, 0)
        assert not [
            line for line in server.lines[before:] if "starting another" in line
        ]  # stopped, not restarted


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--http", "127.0.0.1:0", "--workers", "0"], "--workers takes 1 or more processes, not 0"),
        (["--http", "127.0.0.1:0", "--workers", "-3"], "--workers takes 1 or more processes, not -3"),
        (["--http", "127.0.0.1:0", "--workers", "two"], "--workers takes a number of processes, not `two`"),
        (["--workers", "2"], "--workers goes with --http: stdio is one pipe, served by one process"),
    ],
)
def test_a_bad_worker_count_is_refused_saying_why(tmp_path: Path, options: list[str], said: str) -> None:
    refused = run_cli("serve", "--run-dir", "runs", *options, cwd=tmp_path)
    assert refused.returncode == 2
    assert said in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_worker_that_cannot_start_stops_them_all_and_is_not_restarted(tmp_path: Path) -> None:
    refused = run_cli(
        "serve",
        "--run-dir",
        "runs",
        "--http",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--llm",
        "nonsense",
        cwd=tmp_path,
    )
    assert refused.returncode == 1  # as one process says it
    assert "--llm: a model is `PROVIDER:MODEL`" in refused.stderr
    assert "starting another" not in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a zombie is told from /proc")
def test_workers_whose_supervisor_was_sigkilled_drain_and_end_by_themselves(tmp_path: Path) -> None:
    with http_server(tmp_path, "--run-dir", "runs", "--workers", "2") as server:
        wait_until(lambda: len(SERVING.findall("".join(server.lines))) == 2, "two workers serving")
        workers = [int(pid) for pid in SERVING.findall("".join(server.lines))]
        server.process.kill()
        server.process.wait()
        wait_until(lambda: all(_ended(worker) for worker in workers), "the workers to end")


def _ended(pid: int) -> bool:
    """Gone, or a zombie its new parent has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
