"""The learn_code fast path across `serve --http` instances over one PostgreSQL database
(issue 23): the script runs on the instance that started the step, its delegations are
answered through the others, and each answer returns the script's next delegation; an
instance killed while its script runs leaves an attempt the others fail once its lease
(its presence in the database) is gone, and the run goes on."""

from __future__ import annotations

import shutil
import textwrap
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from todoflow.runtime import process
from todoflow.runtime.entries import Delegate, Entry, FastPathFailed, FastPathStarted
from todoflow.runtime.store.base import runs_at

from ...conftest import ROOT
from .test_http import Server, client, http_server
from .test_http_postgres import _on
from .test_mcp import refused
from .test_served_fast_path import converted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _instances(stack: ExitStack, folder: Path, pg_url: str) -> list[Server]:
    """Three instances on one database, serving examples/fast-path.todoflow with its
    learnings; the folder is their shared workspace."""
    (folder / "flows").mkdir()
    shutil.copy(ROOT / "examples" / "fast-path.todoflow", folder / "flows")
    shutil.copytree(ROOT / "examples" / "learnings", folder / "learnings")
    # one process an instance: it runs the script (the runner's pid), and a SIGKILL ends it
    options = ("--store", pg_url, "--learnings", "learnings", "flows", "--workers", "1")
    return [stack.enter_context(http_server(folder, *options)) for _ in range(3)]


async def _started(urls: list[str], **prepare: Any) -> dict[str, Any]:
    """The run prepared on instance 0 and executed on instance 1, whose script it runs:
    its first delegation."""
    prepared = await _on(
        urls[0], "start", action="prepare", workflowId="convert", parentExecutionId="none", **prepare
    )
    directive = await _on(urls[1], "start", action="execute", startAttemptId=prepared["startAttemptId"])
    assert directive["node"] == "delegated" and directive["fastPath"] == "running", directive
    return directive


async def _convert(url: str, folder: Path, directive: dict[str, Any], done: int) -> dict[str, Any]:
    """The client's sub-agent: convert the export the delegation names, then answer."""
    reply = converted(folder, directive, done)
    return await _on(url, "step", processId=directive["processId"], attemptId=directive["attemptId"], **reply)


def _journal(pg_url: str, process_id: str) -> list[Entry]:
    with process.open_process(pg_url, process_id)[0] as engine:
        return engine.store.entries()


async def test_a_learn_code_step_completes_by_the_fast_path_answered_through_other_instances(
    tmp_path: Path, pg_url: str
) -> None:
    with ExitStack() as stack:
        servers = _instances(stack, tmp_path, pg_url)
        urls = [server.url for server in servers]
        directive = await _started(urls)
        for done, url in enumerate([urls[2], urls[0], urls[2]]):  # every answer through another
            if done:  # the answering instance returned the script's next delegation
                assert directive["node"] == "delegated" and directive["fastPath"] == "running", directive
            directive = await _convert(url, tmp_path, directive, done)
        assert directive["completed"] is True and "fastPath" not in directive
    pid = directive["processId"]
    entries = _journal(pg_url, pid)
    (started,) = [entry for entry in entries if isinstance(entry, FastPathStarted)]
    assert started.runner is not None and started.runner.endswith(f":{servers[1].process.pid}")
    assert [entry.by for entry in entries if isinstance(entry, Delegate)] == ["script"] * 3
    assert not any(isinstance(entry, FastPathFailed) for entry in entries)
    answered = [s for s in servers if f"tools/call step {pid} 200" in "".join(s.lines)]
    assert answered == [servers[0], servers[2]]  # the script's instance took no answer
    learned = runs_at(pg_url).learnings(None).records("converter")
    assert len(learned) == 3  # each validated delegation learned from, as the orchestrator's are


async def test_an_instance_killed_while_its_script_runs_loses_the_attempt_to_the_others(
    tmp_path: Path, pg_url: str
) -> None:
    with ExitStack() as stack:
        servers = _instances(stack, tmp_path, pg_url)
        pid = (await _started(urls := [server.url for server in servers]))["processId"]
        # Killed and not reaped: to this machine its pid still exists, as a process of another
        # machine would; only its lease in the database says that nobody runs the script.
        servers[1].process.kill()
        for attempt in range(60):
            status = await _on(urls[attempt % 2 * 2], "status", processId=pid)
            if "fastPath" not in status["directive"]:
                break
            await anyio.sleep(0.5)
        directive = status["directive"]
        assert directive["node"] == "intake", directive  # the step afresh, with the orchestrator
        ready = [{k: t[k] for k in ("action", "expected_result")} for t in directive["ready_tasks"]]
        arguments = {"processId": pid, "attemptId": directive["attemptId"], "tasks": ready}
        directive = await _on(urls[2], "step", **arguments, progress_checklist_outcome="3 todos")
        assert directive["node"] != "intake" and "fastPath" not in directive  # the orchestrator's turn
    failed = [entry for entry in _journal(pg_url, pid) if isinstance(entry, FastPathFailed)]
    assert [entry.reason for entry in failed] == [
        "the fast path was interrupted (the run stopped while it ran)"
    ]


ONE_THEN_FAIL = textwrap.dedent(
    """\
    import json, os, sys, urllib.request
    body = {"route_id": "convert", "todo_id": "todo_1", "instructions": "Convert exports/a.json."}
    headers = {"Authorization": "Bearer " + os.environ["MCP_API_TOKEN"]}
    url = os.environ["MCP_API_URL"] + "/tools/custom/call_sub_agent"
    urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers)).read()
    sys.exit(3)
    """
)


async def test_fast_path_only_a_failed_attempt_is_the_error_of_the_call_on_another_instance(
    tmp_path: Path, pg_url: str
) -> None:
    with ExitStack() as stack:
        servers = _instances(stack, tmp_path, pg_url)
        (tmp_path / "learnings" / "convert-all" / "main.py").write_text(ONE_THEN_FAIL)
        directive = await _started(urls := [server.url for server in servers], fastPathOnly=True)
        reply = {"evidence": "csv/a.csv has 1 row", "progress_execution_outcome": "a converted"}
        async with client(urls[2], token=None) as session:
            text = await refused(
                session, "step", processId=directive["processId"], attemptId=directive["attemptId"], **reply
            )
    assert "fast_path_only: the fast path of step `convert-all` failed: main.py exited with 3" in text
    assert f"run `{directive['processId']}` is kept" in text
