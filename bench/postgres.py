"""The PostgreSQL store's speed, against its floor on the same server in the same run.

The floor is the bare guarded transaction, with no engine: the one statement that
moves a process row's `seq` from N to N+1 only if it is still N and inserts the journal
row (todoflow's own tables), committed (synchronous_commit on, as the store runs). Ours is
`Engine.step` of a confirmation through `PgStore`: the reply checked on the state the
store knows, the step's one statement (guard, row, a notification if the run is
followed). Both from 1 client (per-step latency) and from 8 concurrent clients, each a program of its own with
its own connection (steps per second), interleaved over rounds. Then resuming a run of
1,000 confirmations from the database: open it and ask its first directive.

    .venv/bin/python -m bench.postgres
"""

from __future__ import annotations

import io
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from pydantic_core import from_json

from bench.measure import Figure, median_time, report
from bench.runtime import replies, source
from bench.scratch import scratch
from tests.support.postgres import cluster
from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine
from todoflow.runtime.store import postgres as pg_store
from todoflow.runtime.store.base import runs_at

ROUNDS = 5
STEPS = 400  # per client and round
CLIENTS = 8
CHECKLIST = 100  # confirmations per checklist (a checklist holds at most 100 tasks)


def floor_client(url: str, pid: str) -> Callable[[int], float]:
    """A client of the floor: `n` guarded transactions in a row; their time."""
    connection = psycopg.connect(url, autocommit=True)
    connection.execute("INSERT INTO todoflow_processes (process_id, meta) VALUES (%s, '{}')", (pid,))
    seq = [0]
    line = '{"seq":%d,"at":"2026-01-01T00:00:00.000Z","by":"agent","step":"s0","type":"confirm","position":1,'
    statement = (
        "WITH guard AS (UPDATE todoflow_processes SET seq = %(after)s WHERE process_id = %(pid)s "
        "AND seq = %(before)s RETURNING process_id) INSERT INTO todoflow_journal (process_id, seq, entry) "
        "SELECT process_id, %(after)s, %(entry)s::json FROM guard"
    )

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            entry = (line % (seq[0] + 1)) + '"evidence":"checked","progress_execution_outcome":"done"}'
            cursor = connection.execute(
                statement, {"pid": pid, "before": seq[0], "after": seq[0] + 1, "entry": entry}
            )
            assert cursor.rowcount == 1
            seq[0] += 1
        return time.perf_counter() - start

    return run


def engine_client(url: str | Path, pid: str, folder: Path) -> Callable[[int], float]:
    """A client of the store (a database, or a folder of run folders): `n` confirmations
    through the engine; their time."""
    definition = from_source(source(1, CHECKLIST), "bench.todoflow").or_raise()
    engines: list[Engine] = []
    count = [0]

    def fresh() -> Engine:  # a new 100-task checklist when one is done, past its intake
        for engine in engines:
            engine.close()
        engine = process.start(definition, url, workspace=folder, process_id=f"{pid}-{len(engines)}")
        engines.append(engine)
        directive = engine.directive()
        tasks = [
            {"action": t.action, "expected_result": t.expected_result} for t in directive.ready_tasks or ()
        ]
        engine.step(
            directive.attempt_id, {"tasks": tasks, "progress_checklist_outcome": "ready"}, by="caller"
        )
        return engine

    engine = fresh()
    attempt = [engine.directive().attempt_id]

    def run(n: int) -> float:
        nonlocal engine
        took = 0.0
        for _ in range(n):
            if count[0] and count[0] % CHECKLIST == 0:
                engine = fresh()
                attempt[0] = engine.directive().attempt_id
            reply = {"evidence": f"checked {count[0]}", "progress_execution_outcome": "done"}
            start = time.perf_counter()
            attempt[0] = engine.step(attempt[0], reply).attempt_id
            took += time.perf_counter() - start
            count[0] += 1
        return took

    return run


def _worker(kind: str, url: Any, pid: str, folder: str, rounds: int, n: int, barrier: Any) -> None:
    """One client program: its own connection (or store), `rounds` times `n` steps, each
    round started with the others'."""
    client = floor_client(url, pid) if kind == "floor" else engine_client(url, pid, Path(folder))
    for _ in range(rounds):
        barrier.wait()
        client(n)
        barrier.wait()


def concurrently(
    kind: str, url: str | Path, folder: Path, rounds: int, n: int, tag: int, clients: int = CLIENTS
) -> list[float]:
    """Steps per second of `clients` client programs at once, each doing `n` steps a round
    (`url`: a database, or a folder of run folders)."""
    context = multiprocessing.get_context("spawn")  # fresh programs: no pool or connection inherited
    barrier = context.Barrier(clients + 1, timeout=300)
    workers = [
        context.Process(
            target=_worker, args=(kind, url, f"{kind}-many-{tag}-{c}", str(folder), rounds, n, barrier)
        )
        for c in range(clients)
    ]
    for worker in workers:
        worker.start()
    rates = []
    for _ in range(rounds):
        barrier.wait()
        start = time.perf_counter()
        barrier.wait()
        rates.append(clients * n / (time.perf_counter() - start))
    for worker in workers:
        worker.join()
    return rates


def resume_run(url: str, folder: Path) -> tuple[float, float]:
    """A run of 10 checklists of 100 tasks in the database, stopped before its last
    confirmation; the median time to open it and ask its first directive, and of its floor:
    what the store must read (the meta, the latest snapshot, the journal rows after it),
    each parsed; the plan's files are read once per process (the plan is kept built for
    their sha256), so the floor reads them not."""
    definition = from_source(source(10, CHECKLIST), "bench.todoflow").or_raise()
    engine = process.start(definition, url, workspace=folder, process_id="resume")
    assert drive(engine, ScriptedAgent(replies(10, CHECKLIST)[:-1], folder), io.StringIO()) == "stopped"
    engine.close()

    def resume() -> None:
        with process.open_process(url, "resume")[0] as opened:
            assert opened.directive().role == "Task 100/100"

    connection = psycopg.connect(url, autocommit=True)

    def floor() -> None:
        meta = connection.execute(
            "SELECT meta::text FROM todoflow_processes WHERE process_id = 'resume'"
        ).fetchone()
        snap = connection.execute(
            "SELECT seq, state::text FROM todoflow_snapshots WHERE process_id = 'resume' "
            "ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        assert meta is not None and snap is not None
        rows = connection.execute(
            "SELECT entry::text FROM todoflow_journal WHERE process_id = 'resume' AND seq > %s ORDER BY seq",
            (snap[0],),
        ).fetchall()
        from_json(meta[0]), from_json(snap[1]), [from_json(row[0]) for row in rows]

    resume()  # warm: modules imported, as in a long-running server
    ours, floors = [], []
    for _ in range(ROUNDS):
        floors.append(median_time(floor, 50))
        ours.append(median_time(resume, 50))
    connection.close()
    return ours, floors


def main() -> list[Figure]:
    step = Figure(
        "todoflow step, 1 client", "guarded transaction (the floor), 1 client", target="<= 1.5", unit="us"
    )
    many = Figure(
        f"todoflow steps/s, {CLIENTS} clients",
        f"guarded transactions/s, {CLIENTS} clients",
        target=">= 0.7",
        unit="/s",
    )
    resumed = Figure(
        "resume + first directive (1,000 steps)",
        "floor: meta, snapshot and rows read",
        target="<= 3.0",
        unit="ms",
    )
    with scratch() as folder:
        folder.chmod(0o755)  # the server's own user reaches its cluster inside
        with cluster(folder / "postgres") as server:
            url = server.fresh_database("bench")
            pg_store.migrate(url, create=True)
            runs_at(url).close()
            floor, ours = floor_client(url, "floor"), engine_client(url, "ours", folder)
            for tag in range(ROUNDS):
                step.add(ours(STEPS) / STEPS, floor(STEPS) / STEPS)
                theirs = concurrently("floor", url, folder, 1, STEPS // 2, tag)[0]
                many.add(concurrently("ours", url, folder, 1, STEPS // 2, tag)[0], theirs)
            for took, floored in zip(*resume_run(url, folder), strict=True):
                resumed.add(took, floored)
            runs_at(url).close()
    report("postgres", [step, many, resumed], ROUNDS)
    return [step, many, resumed]


if __name__ == "__main__":
    main()
