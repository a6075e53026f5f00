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
from collections import deque
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


# A client: `prepare(n)` makes what its next `n` steps need, untimed; `run(n)` takes them
# and returns their time.
Client = tuple[Callable[[int], None], Callable[[int], float]]


def floor_client(url: str, pid: str) -> Client:
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

    return lambda n: None, run


def engine_client(url: str | Path, pid: str, folder: Path) -> Client:
    """A client of the store (a database, or a folder of run folders): `n` confirmations
    through the engine; their time. The runs they need (a checklist holds at most 100
    tasks) are made by `prepare`, before the steps are timed: a run's creation and its
    checklist's intake are not confirmations, and the floor's process row is made before
    its steps too."""
    definition = from_source(source(1, CHECKLIST), "bench.todoflow").or_raise()
    made = [0]
    ready: deque[tuple[Engine, str]] = deque()  # runs past their intake, not stepped yet
    left = [0]  # confirmations left in the current run's checklist

    def fresh() -> tuple[Engine, str]:  # a new run with its 100-task checklist taken in
        engine = process.start(definition, url, workspace=folder, process_id=f"{pid}-{made[0]}")
        made[0] += 1
        directive = engine.directive()
        tasks = [
            {"action": t.action, "expected_result": t.expected_result} for t in directive.ready_tasks or ()
        ]
        reply = {"tasks": tasks, "progress_checklist_outcome": "ready"}
        return engine, engine.step(directive.attempt_id, reply, by="caller").attempt_id

    def prepare(n: int) -> None:
        while left[0] + CHECKLIST * len(ready) < n:
            ready.append(fresh())

    engine, attempt = fresh()
    left[0] = CHECKLIST

    def run(n: int) -> float:
        nonlocal engine, attempt
        prepare(n)
        took = 0.0
        for _ in range(n):
            if not left[0]:
                engine.close()
                (engine, attempt), left[0] = ready.popleft(), CHECKLIST
            reply = {"evidence": f"checked {left[0]}", "progress_execution_outcome": "done"}
            start = time.perf_counter()
            attempt = engine.step(attempt, reply).attempt_id
            took += time.perf_counter() - start
            left[0] -= 1
        return took

    return prepare, run


def _worker(kind: str, url: Any, pid: str, folder: str, rounds: int, n: int, barrier: Any) -> None:
    """One client program: its own connection (or store), `rounds` times `n` steps, each
    round started with the others' once what its steps need is made."""
    prepare, client = floor_client(url, pid) if kind == "floor" else engine_client(url, pid, Path(folder))
    for _ in range(rounds):
        prepare(n)
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
            floor, ours = floor_client(url, "floor")[1], engine_client(url, "ours", folder)[1]
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
