"""Calls for different runs overlap in one server; one run's calls go one at a time, in
the order they arrived; a cancelled call either never ran or ran to its end."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from todoflow.runtime.serve.mcp import build_server
from todoflow.runtime.serve.service import TodoService, Workflows
from todoflow.runtime.serve.turns import Turns

pytestmark = pytest.mark.anyio
GUARD = 3  # seconds a thread waits for the other before the test fails: a hang guard, not a timing


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Seen:
    """What the calls' work did: the order it started in, and how many ran at once."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.go = threading.Event()

    def work(self, number: int) -> int:
        with self.lock:
            self.order.append(number)
            self.running += 1
            self.most = max(self.most, self.running)
        if number == 0:
            assert self.go.wait(GUARD), "the first call was never let go"
        with self.lock:
            self.running -= 1
        return number


async def waiting(turns: Turns, run: str, count: int, seen: Seen | None = None) -> None:
    """Until `count` calls of `run` wait for their turn (or, with `seen`, a second call's
    work has started: what the test then finds wrong)."""
    while turns._runs[run].lock.statistics().tasks_waiting < count:
        if seen is not None and len(seen.order) > 1:
            return
        await anyio.lowlevel.checkpoint()


async def test_one_runs_calls_go_one_at_a_time_in_arrival_order() -> None:
    turns, seen = Turns(), Seen()
    async with anyio.create_task_group() as group:
        for number in range(5):
            group.start_soon(turns.run, "run-1", lambda n=number: seen.work(n))
            await anyio.lowlevel.checkpoint()  # arrived: its turn taken, in this order
        await waiting(turns, "run-1", 4)
        seen.go.set()
    assert seen.order == [0, 1, 2, 3, 4]
    assert seen.most == 1
    assert len(turns) == 0  # nothing kept once the run's calls are done


async def test_a_call_cancelled_while_it_waits_never_runs() -> None:
    turns, seen = Turns(), Seen()
    async with anyio.create_task_group() as group:
        group.start_soon(turns.run, "run-1", lambda: seen.work(0))
        await anyio.lowlevel.checkpoint()
        async with anyio.create_task_group() as waiter:
            waiter.start_soon(turns.run, "run-1", lambda: seen.work(1))
            await waiting(turns, "run-1", 1)
            waiter.cancel_scope.cancel()  # its client went away
        seen.go.set()
    assert seen.order == [0]
    assert len(turns) == 0


async def test_a_call_cancelled_while_its_work_runs_lets_it_finish_before_the_next() -> None:
    turns, seen, first = Turns(), Seen(), anyio.CancelScope()

    async def cancelled() -> None:
        with first:
            await turns.run("run-1", lambda: seen.work(0))

    async with anyio.create_task_group() as group:
        group.start_soon(cancelled)
        while not seen.order:  # its work is running on a worker thread
            await anyio.lowlevel.checkpoint()
        first.cancel()  # its client went away
        group.start_soon(turns.run, "run-1", lambda: seen.work(1))
        await waiting(turns, "run-1", 1, seen)
        assert seen.order == [0]  # the next call waits: the first one's work has not ended
        seen.go.set()
    assert seen.order == [0, 1]
    assert seen.most == 1


async def test_steps_of_two_runs_overlap_in_one_server(tmp_path: Path, monkeypatch: Any) -> None:
    """Each run's journal sync waits for the other run's: served one call at a time,
    neither would ever arrive."""
    server = build_server(TodoService(Workflows([]), tmp_path / "runs", tmp_path))
    ready = [{"action": f"Task {i}", "expected_result": f"Task {i} checked"} for i in range(2)]
    directives = []
    for _ in range(2):
        prepared = await _call(server, "start", action="prepare", workflowId="todo-list", tasks=ready)
        started = await _call(server, "start", action="execute", startAttemptId=prepared["startAttemptId"])
        directives.append(
            await _call(server, "step", **_ids(started), tasks=ready, progress_checklist_outcome="ready")
        )
    both = threading.Barrier(2, timeout=GUARD)
    synced = os.fdatasync

    def sync(fd: int) -> None:
        synced(fd)
        both.wait()  # a BrokenBarrierError fails the call: the other run's step never came

    monkeypatch.setattr(os, "fdatasync", sync)
    answers: dict[str, dict[str, Any]] = {}

    async def confirm(directive: dict[str, Any]) -> None:
        reply = {"evidence": "checked", "progress_execution_outcome": "done"}
        answers[directive["processId"]] = await _call(server, "step", **_ids(directive), **reply)

    async with anyio.create_task_group() as group:
        for directive in directives:
            group.start_soon(confirm, directive)
    for directive in directives:  # each confirmed: its run moved on to its next task
        assert answers[directive["processId"]]["attemptId"] != directive["attemptId"]


def _ids(directive: dict[str, Any]) -> dict[str, Any]:
    return {"processId": directive["processId"], "attemptId": directive["attemptId"]}


async def _call(server: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await server.call_tool(tool, arguments)
    assert not result.is_error, result.content
    structured: dict[str, Any] = result.structured_content
    return structured
