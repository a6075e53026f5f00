"""`todoflow serve` under `ulimit -n 64` through the official MCP client: it used to run
out of open files after about 18 runs, each keeping 3 descriptors (issue 21 item 7)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from ...conftest import ROOT
from .test_mcp import begin, call

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_forty_runs_under_a_limit_of_64_open_files(tmp_path: Path) -> None:
    command = f"ulimit -n 64 && exec {sys.executable} -m todoflow serve --run-dir runs"
    params = StdioServerParameters(
        command="sh", args=["-c", command], cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        started = [await begin(session, workflowId="todo-list", goal=f"Goal {n}") for n in range(40)]
        for directive in started:  # every run opened again, in turn
            card = await call(session, "status", processId=directive["processId"])
            assert card["directive"]["node"] == "intake"
        listed = await call(session, "status")
    assert len(listed["runs"]) == 40 and {run["status"] for run in listed["runs"]} == {"running", "stopped"}
