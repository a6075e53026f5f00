"""The store's contract, held against every adapter: memory, a run folder, PostgreSQL.

Exactly-once advance, racing replies with one attempt id resolved to one winner,
refusals that change nothing, entries that reload into the same state, learnings
recorded once; and where they differ by design, a retried reply: `Replayed` from the
stores that record which reply used an attempt id (memory, the database), refused as
stale by a run folder (it does not)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime import process
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine, Refusal, Replayed
from todoflow.runtime.state import to_json as state_json
from todoflow.runtime.store.base import runs_at

from ...support.runtime_helpers import CHECKLIST, Clock, confirm, intake

ROUTED = """\
workflow w "W" {
    todo_task build "Build" {
        description "Build the thing."
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/."
                expect file "dist/app"
            }
        }
    }
}
"""


@pytest.fixture(params=["memory", "folder", pytest.param("postgres", marks=pytest.mark.slow)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where the test's runs live: a location of this process's memory (gone after the
    test), a run folder's parent, or a fresh database."""
    if request.param == "memory":
        location = f"memory://{tmp_path.name}"
        yield location
        runs_at(location).close()
    elif request.param == "folder":
        yield tmp_path / "runs"
    else:
        yield request.getfixturevalue("pg_url")


def _start(where: Path | str, tmp_path: Path, source: str = CHECKLIST, pid: str = "p-1") -> Engine:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    definition = from_source(source, "flow.todoflow").or_raise()
    learnings = tmp_path / "learnings"
    return process.start(
        definition, where, workspace=workspace, process_id=pid, clock=Clock(), learnings=learnings
    )


def _open(where: Path | str, pid: str = "p-1") -> Engine:
    return process.open_process(where, pid, clock=Clock())[0]


def test_a_reply_advances_the_run_exactly_once(where: Path | str, tmp_path: Path) -> None:
    engine = _start(where, tmp_path)
    first = engine.directive()
    second = engine.step(first.attempt_id, intake("a", "b"))
    assert (second.role, second.state.seq) == ("Task 1/2", 1)
    third = engine.step(second.attempt_id, confirm(1))
    assert third.state.seq == 2
    with pytest.raises(Refusal, match="stale or used"):
        engine.step(second.attempt_id, confirm(99))  # another reply with a used attempt id
    engine.close()
    again = _open(where)
    assert again.directive().state.seq == 2
    assert [e.TYPE for e in again.store.entries()] == ["submit_tasks", "confirm"]
    again.close()


def test_racing_replies_with_one_attempt_id_have_one_winner(where: Path | str, tmp_path: Path) -> None:
    _start(where, tmp_path).close()
    engines = [_open(where) for _ in range(4)]  # four programs' stores on the one run
    attempt = engines[0].directive().attempt_id
    wins: list[int] = []
    refusals: list[str] = []
    barrier = threading.Barrier(len(engines) * 3)

    def reply(engine: Engine, n: int) -> None:
        barrier.wait()
        try:
            engine.step(attempt, intake(f"task of racer {n}"))
            wins.append(n)
        except Refusal as refusal:
            refusals.append(refusal.reason)

    threads = [
        threading.Thread(target=reply, args=(engine, i * 3 + j))
        for i, engine in enumerate(engines)
        for j in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1 and len(refusals) == 11
    assert all("stale or used" in reason for reason in refusals)
    entries = engines[1].store.entries()
    assert len(entries) == 1 and entries[0].tasks[0].action == f"task of racer {wins[0]}"
    for engine in engines:
        assert engine.directive().state.seq == 1  # each store sees the winner's entry
        engine.close()


def test_a_refused_reply_changes_nothing(where: Path | str, tmp_path: Path) -> None:
    engine = _start(where, tmp_path)
    directive = engine.step(engine.directive().attempt_id, intake("a"))
    before = (engine.store.entries(), state_json(engine.directive().state))
    for bad in ({"evidence": "x" * 600, "progress_execution_outcome": "o"}, {"tasks": []}):
        with pytest.raises(Refusal):
            engine.step(directive.attempt_id, bad)
    assert (engine.store.entries(), state_json(engine.directive().state)) == before
    engine.close()
    reopened = _open(where)
    assert state_json(reopened.directive().state) == before[1]
    reopened.close()


def test_entries_reload_into_the_same_state(where: Path | str, tmp_path: Path) -> None:
    engine = _start(where, tmp_path)
    directive = engine.step(engine.directive().attempt_id, intake("a", "b", "c"))
    directive = engine.step(directive.attempt_id, confirm(1))
    directive = engine.step(directive.attempt_id, {"teleportTo": "teleport-revise-tasks"})
    revised = {
        **intake("a", "b2", "c"),
        "resume_from_task": 2,
        "progress_execution_outcome": "revised",
    }
    directive = engine.step(directive.attempt_id, revised)
    expected = state_json(directive.state)
    engine.close()
    reopened = _open(where)
    assert state_json(reopened.directive().state) == expected
    assert [e.seq for e in reopened.store.entries()] == [1, 2, 3, 4]
    assert [e.seq for e in reopened.store.entries(after=2)] == [3, 4]
    reopened.close()


def test_a_learning_is_recorded_exactly_once(where: Path | str, tmp_path: Path) -> None:
    engine = _start(where, tmp_path, ROUTED)
    directive = engine.step(engine.directive().attempt_id, intake("compile it"))
    delegate = {
        "next_action": "delegate",
        "todo_id_to_execute": "todo_1",
        "selected_route_id": "compile",
        "instructions_to_sub_agent": "Run make.",
    }
    directive = engine.step(directive.attempt_id, delegate)
    (tmp_path / "workspace" / "dist").mkdir()
    (tmp_path / "workspace" / "dist" / "app").write_text("binary")
    engine.step(directive.attempt_id, {"evidence": "make printed OK", "progress_execution_outcome": "built"})
    engine.repair()  # a repair rewrites what is missing, never what is there
    engine.close()
    reopened = _open(where)
    reopened.repair()
    assert reopened.learnings is not None
    records = reopened.learnings.records("compiler")
    assert [r.id for r in records] == ["p-1:3"]
    assert records[0].evidence == "make printed OK"
    reopened.close()


def test_a_retried_reply_is_replayed_by_the_database_and_stale_to_a_run_folder(
    where: Path | str, tmp_path: Path
) -> None:
    engine = _start(where, tmp_path)
    attempt = engine.directive().attempt_id
    applied = engine.step(attempt, intake("a"))
    if isinstance(where, Path):
        with pytest.raises(Refusal, match="stale or used"):
            engine.step(attempt, intake("a"))
    else:
        retry = _open(where)  # another program, as after a lost answer: the same reply again
        with pytest.raises(Replayed) as replayed:
            retry.step(attempt, intake("a"))
        assert replayed.value.directive.attempt_id == applied.attempt_id
        with pytest.raises(Refusal, match="stale or used"):  # a different reply with it is stale
            retry.step(attempt, intake("b"))
        retry.close()
    assert len(engine.store.entries()) == 1
    engine.close()


def test_the_last_reply_of_a_run_is_replayed_too(where: Path | str, tmp_path: Path) -> None:
    engine = _start(where, tmp_path)
    directive = engine.step(engine.directive().attempt_id, intake("a"))
    (tmp_path / "workspace" / "out.txt").write_text("done")
    final = engine.step(directive.attempt_id, confirm(1))
    assert final.completed
    expected: Any = Replayed if isinstance(where, str) else Refusal
    with pytest.raises(expected):
        engine.step(directive.attempt_id, confirm(1))
    engine.close()


def test_a_location_that_can_take_a_step_says_it_is_ready(where: Path | str, tmp_path: Path) -> None:
    """`serve --http`'s /readyz asks this: a writable folder, a database at the current schema."""
    _start(where, tmp_path).close()
    assert runs_at(where).ready() is None


def test_who_drives_a_run_is_named_while_it_does(where: Path | str, tmp_path: Path) -> None:
    """Issue 26: `run --resume` names the program that drives a run (`pid N on HOST`)."""
    import os
    import socket

    with _start(where, tmp_path) as engine:
        runs = runs_at(where)
        assert runs.driver(engine.process_id) is None
        with runs.driving(engine.process_id):
            assert runs.driver(engine.process_id) == f"pid {os.getpid()} on {socket.gethostname()}"
        assert runs.driver(engine.process_id) is None


def test_a_run_started_with_a_bound_on_turns_keeps_it(where: Path | str, tmp_path: Path) -> None:
    """Issue 26: `run --max-turns` on a fresh run is recorded and every todo_task step's."""
    definition = from_source(ROUTED, "flow.todoflow").or_raise()
    (tmp_path / "workspace").mkdir()
    with process.start(definition, where, workspace=tmp_path / "workspace", max_turns=3) as engine:
        pid = engine.process_id
    engine, _ = process.open_process(where, pid)
    with engine:
        assert engine.plan.step("build").configs.execution_max_turns == 3
        assert runs_at(where).read_meta(pid).max_turns == 3


def test_a_removed_run_is_gone_and_others_stay(where: Path | str, tmp_path: Path) -> None:
    """Issue 26: `todoflow runs rm` on every store."""
    from todoflow.runtime.store.base import StoreError

    _start(where, tmp_path).close()
    _start(where, tmp_path, pid="p-2").close()
    runs = runs_at(where)
    runs.remove("p-1")
    assert [pid for pid, _ in runs.metas()] == ["p-2"]
    with pytest.raises(StoreError, match="no run `p-1`"):
        runs.remove("p-1")
    with _open(where, "p-2") as engine:
        assert engine.directive().node == "intake"
