"""Steps per second of `serve --http` instances over one PostgreSQL database: 8 clients
against 3 instances, each call to one picked at random, and the same 8 against 1
instance, on the same database in the same run, rounds alternating. Beside each, where
the time goes: the CPU the instances, PostgreSQL and the clients spent per step, and a
step's round trip at the client against its time inside the instance (the access log).

Each client is a program of its own (the official client, one session per instance),
runs a todo-list run of `STEPS` tasks past its intake, and confirms them as fast as
its answers come; the rounds time the confirmations, from all clients' start to the
last one's end.

    .venv/bin/python -m bench.mcp_fleet [ROUNDS] [STEPS]
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import statistics
import sys
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import anyio

from bench.mcp_http import Served, calling, served, session_at, walk
from bench.measure import Figure, report
from bench.scratch import scratch
from tests.support.postgres import cluster
from todoflow.runtime.store import postgres as pg_store

CLIENTS = 8
INSTANCES = 3
ROUNDS = 3
STEPS = 40  # confirmations per client and round
TICK = os.sysconf("SC_CLK_TCK")


class Round(NamedTuple):
    """One round's steps per second; the CPU ms per step of the instances, PostgreSQL
    and the clients; a step's median ms at the client and inside the instance."""

    rate: float
    servers: float
    database: float
    clients: float
    trip: float
    inside: float


def main(rounds: int = ROUNDS, steps: int = STEPS) -> list[Figure]:
    rate = Figure(
        f"steps/s, {INSTANCES} instances x {CLIENTS} clients", f"1 instance x {CLIENTS} clients", unit="/s"
    )
    shares: dict[int, list[Round]] = {1: [], INSTANCES: []}
    with scratch() as folder, ExitStack() as stack:
        folder.chmod(0o755)  # the server's own user reaches its cluster inside
        server = stack.enter_context(cluster(folder / "postgres"))
        url = server.fresh_database("fleet")
        pg_store.migrate(url, create=True)
        instances = [stack.enter_context(served(folder, "--store", url)) for _ in range(INSTANCES)]
        postmaster = server.data / "postmaster.pid"
        for _ in range(rounds):
            one = _round(instances[:1], postmaster, steps)
            many = _round(instances, postmaster, steps)
            rate.add(many.rate, one.rate)
            shares[1].append(one)
            shares[INSTANCES].append(many)
    report("mcp_fleet", [rate], rounds)
    for count, measured in shares.items():
        m = {name: _median(measured, name) for name in Round._fields}
        print(
            f"    {count} instance(s): CPU per step: instances {m['servers']:.2f} ms, "
            f"PostgreSQL {m['database']:.2f} ms, clients {m['clients']:.2f} ms; "
            f"a step {m['trip']:.1f} ms at the client, {m['inside']:.1f} ms inside the instance"
        )
    return [rate]


def _median(rounds: list[Round], field: str) -> float:
    return statistics.median(getattr(measured, field) for measured in rounds)


def _round(instances: list[Served], postmaster: Path, steps: int) -> Round:
    context = multiprocessing.get_context("spawn")  # no fork of this program's threads
    barrier, out = context.Barrier(CLIENTS + 1), context.Queue()
    urls = [instance.url for instance in instances]
    workers = [
        context.Process(target=_client, args=(urls, steps, seed, barrier, out)) for seed in range(CLIENTS)
    ]
    for worker in workers:
        worker.start()
    barrier.wait()
    logged = [len(instance.log()) for instance in instances]
    before = cpu_seconds([instance.pid for instance in instances]), postgres_cpu(postmaster)
    results = [out.get() for _ in workers]
    servers = cpu_seconds([instance.pid for instance in instances]) - before[0]
    database = postgres_cpu(postmaster) - before[1]
    for worker in workers:
        worker.join()
    total = CLIENTS * steps
    wall = max(end for _, end, _, _ in results) - min(start for start, _, _, _ in results)
    trip = statistics.median(t for _, _, _, trips in results for t in trips)
    clients = sum(cpu for _, _, cpu, _ in results)
    inside = statistics.median(
        float(line.split()[-1])
        for instance, start in zip(instances, logged, strict=True)
        for line in instance.log()[start:]
        if " tools/call step " in line
    )
    ms = 1000 / total  # CPU seconds of the round -> ms per step
    return Round(total / wall, servers * ms, database * ms, clients * ms, trip * 1000, inside)


def cpu_seconds(pids: list[int], children: bool = False) -> float:
    """The CPU seconds (user and system) these processes have spent (`children`: with
    their ended children's)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += sum(int(n) for n in fields[11 : 15 if children else 13])  # utime, stime, cutime, cstime
    return ticks / TICK


def postgres_cpu(postmaster: Path) -> float:
    """The CPU seconds of the PostgreSQL server: its postmaster, the backends it reaped,
    and those alive (the instances' pools)."""
    pid = int(postmaster.read_text().split()[0])
    backends = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:  # its parent
                backends.append(int(stat.parent.name))
    alive = 0.0
    with contextlib.suppress(OSError):  # a backend that ended meanwhile: counted with its parent
        alive = cpu_seconds(backends)
    return cpu_seconds([pid], children=True) + alive


def _client(urls: list[str], steps: int, seed: int, barrier: Any, out: Any) -> None:
    out.put(anyio.run(_confirms, urls, steps, seed, barrier))


async def _confirms(
    urls: list[str], steps: int, seed: int, barrier: Any
) -> tuple[float, float, float, list[float]]:
    """Its start and end (wall clock), its CPU seconds, and each round trip."""
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(session_at(url)) for url in urls]
        confirm = await walk(calling(sessions, random.Random(seed)), steps)
        await anyio.to_thread.run_sync(barrier.wait)
        start, cpu = time.time(), time.process_time()
        trips = [await confirm() for _ in range(steps)]
        return start, time.time(), time.process_time() - cpu, trips


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
