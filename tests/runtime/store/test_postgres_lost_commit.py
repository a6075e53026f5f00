"""A connection lost in the middle of a commit, made by a relay that cuts it there
(`tests/support/postgres.py` `Relay`): the program cannot tell whether the database saved the
write, so it does the write again. Every write is safe to repeat: a run's creation, an MCP
start prepared and executed, a step — none lost, none made twice, none reported failed
when it was saved."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.runtime import process
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine, Replayed
from todoflow.runtime.serve.service import TodoService, Workflows
from todoflow.runtime.store import postgres as pg_store
from todoflow.runtime.store.base import StartRecord, StoreError, runs_at

from ...support.postgres import Cluster, Relay
from ...support.runtime_helpers import CHECKLIST, Clock, intake

pytestmark = pytest.mark.slow
COMMIT = b"COMMIT\x00"  # the statement that ends a transaction, as the client sends it


@pytest.fixture
def relay(pg_cluster: Cluster, pg_url: str) -> Iterator[Relay]:
    made = Relay(pg_cluster.port)
    yield made
    runs_at(made.url(pg_url)).close()
    made.close()


def _start(url: str, tmp_path: Path, pid: str = "p-1", start: str | None = None) -> Engine:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    definition = from_source(CHECKLIST, "flow.todoflow").or_raise()
    return process.start(
        definition, url, workspace=workspace, process_id=pid, clock=Clock(), start_attempt_id=start
    )


@pytest.mark.parametrize("delivered", [True, False], ids=["committed", "not-committed"])
def test_a_run_created_over_a_connection_lost_at_its_commit_is_there_once(
    relay: Relay, pg_url: str, tmp_path: Path, delivered: bool
) -> None:
    url = relay.url(pg_url)
    relay.cut(COMMIT, delivered, after=b"INSERT INTO todoflow_processes")
    engine = _start(url, tmp_path)
    assert relay.cuts == 1
    assert [pid for pid, _ in process.runs_at(pg_url).metas()] == ["p-1"]
    assert engine.directive().node == "intake"
    engine.close()
    with pytest.raises(StoreError, match=r"there is a run `p-1` in .* already"):  # the same run, again
        _start(url, tmp_path)


def test_a_start_prepared_over_a_connection_lost_at_its_commit_is_prepared(
    relay: Relay, pg_url: str, tmp_path: Path
) -> None:
    service = TodoService(Workflows([]), relay.url(pg_url), tmp_path)
    relay.cut(COMMIT, True, after=b"INSERT INTO todoflow_starts")
    prepared = service.prepare("todo-list", "parent", None, None)
    assert relay.cuts == 1
    assert service.execute(prepared["startAttemptId"])["node"] == "intake"
    service.engines.close()


def test_a_start_executed_over_a_connection_lost_at_its_commit_makes_one_run(
    relay: Relay, pg_url: str, tmp_path: Path
) -> None:
    """The cause of issue 28's failure: the start's claim was saved, its answer lost, and
    the claim made again found the start claimed — `was executed already`, with no run."""
    service = TodoService(Workflows([]), relay.url(pg_url), tmp_path)
    prepared = service.prepare("todo-list", "parent", None, None)
    relay.cut(COMMIT, True, after=b"UPDATE todoflow_starts")
    directive = service.execute(prepared["startAttemptId"])
    assert relay.cuts == 1
    pid = directive["processId"]
    assert [listed for listed, _ in process.runs_at(pg_url).metas()] == [pid]
    with pytest.raises(TodoflowError, match=rf"was executed already \(process `{pid}`\)"):
        service.execute(prepared["startAttemptId"])
    service.engines.close()


def test_a_start_is_claimed_only_by_the_run_it_makes(pg_url: str, tmp_path: Path) -> None:
    """A program that dies while executing a start, before its run is made, leaves the
    start free for another; of two programs executing one start, one makes the run."""
    starts = runs_at(pg_url).starts()
    starts.prepare("start-1", StartRecord(workflow_id="w", parent_execution_id="none"))
    assert starts.claim("start-1")
    assert starts.executed("start-1") is None  # the claimer died here: nothing holds the start
    _start(pg_url, tmp_path, "p-1", start="start-1").close()
    assert starts.executed("start-1") == "p-1"
    with pytest.raises(StoreError, match=r"`start-1` was executed already \(process `p-1`\)"):
        _start(pg_url, tmp_path, "p-2", start="start-1")
    assert [pid for pid, _ in process.runs_at(pg_url).metas()] == ["p-1"]


@pytest.mark.parametrize("delivered", [True, False], ids=["committed", "not-committed"])
def test_a_step_over_a_connection_lost_at_its_commit_is_replayed_or_taken_again(
    relay: Relay, pg_url: str, tmp_path: Path, delivered: bool
) -> None:
    engine = _start(relay.url(pg_url), tmp_path)
    attempt = engine.directive().attempt_id
    relay.cut(b"WITH guard AS", delivered)  # a step is one statement in autocommit
    if delivered:
        with pytest.raises(Replayed) as replayed:
            engine.step(attempt, intake("a"))
        directive = replayed.value.directive
    else:
        directive = engine.step(attempt, intake("a"))
    assert relay.cuts == 1
    assert directive.node == "work"
    assert [entry.seq for entry in engine.store.entries()] == [1]
    engine.close()


def test_a_call_that_cannot_reach_the_database_fails_within_its_bound_and_changes_nothing(
    relay: Relay, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_store, "CONNECT_TIMEOUT", 1)  # the pool's wait for a connection
    engine = _start(relay.url(pg_url), tmp_path)
    relay.close()
    began = time.monotonic()
    with pytest.raises(pg_store.DatabaseError, match="no connection within the time allowed"):
        engine.step(engine.directive().attempt_id, intake("a"))
    assert time.monotonic() - began < 4  # one wait (1 s) for a connection, not one per try (6 s)
    engine, _ = process.open_process(pg_url, "p-1")
    assert engine.store.entries() == []
    assert engine.directive().node == "intake"
