"""Steps per second of 32 runs stepped at once through one `serve --http --workers N`
(N: the cores), against 32 programs each stepping its own run in process (the engine,
no server), on run folders and on PostgreSQL, rounds interleaved (issue 24, item 4:
at least 0.8x).

Ours: `CLIENT_PROGRAMS` client programs, each with `RUNS // CLIENT_PROGRAMS` runs on a
keep-alive connection of its own, sending raw JSON-RPC `tools/call step` (no client
library, whose CPU would share the cores with the server's); every run is prepared past
its intake before the round, and the round times the confirmations, from the first
client's start to the last one's end. Theirs: `bench.postgres.concurrently`'s client
programs, one per run, each stepping `Engine.step` in process. Beside each round of ours,
where the CPU went per step: the workers, the clients and PostgreSQL.

    .venv/bin/python -m bench.serve_workers [ROUNDS] [STEPS]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from bench.mcp_fleet import cpu_seconds, postgres_cpu
from bench.mcp_http import HEADERS, Served, served
from bench.mcp_http import rpc_request as request
from bench.mcp_http import rpc_result as result
from bench.measure import Figure, report, sync_latency
from bench.postgres import CHECKLIST, concurrently
from bench.runtime import source
from bench.scratch import scratch
from tests.support.postgres import cluster
from todoflow.runtime.serve.workers import default_count
from todoflow.runtime.store import postgres as pg_store

RUNS = 32
CLIENT_PROGRAMS = 4
ROUNDS = 3
STEPS = 40  # confirmations per run and round (a checklist holds CHECKLIST)


class Spent(NamedTuple):
    """One round of ours: steps per second; CPU ms per step of the workers, the clients
    and PostgreSQL (0 on run folders); the share of the steps the busiest worker answered
    (the connections are the workers' to take: 1/N is an even split)."""

    rate: float
    workers: float
    clients: float
    database: float
    busiest: float


def main(rounds: int = ROUNDS, steps: int = STEPS) -> list[Figure]:
    workers = default_count()
    figures, spent = [], {}
    with scratch() as folder, ExitStack() as stack:
        folder.chmod(0o755)  # the server's own user reaches its cluster inside
        flows = folder / "flows"
        flows.mkdir()
        (flows / "bench.todoflow").write_text(source(1, CHECKLIST))
        server = stack.enter_context(cluster(folder / "postgres"))
        url = server.fresh_database("workers")
        pg_store.migrate(url, create=True)
        stores = [("run folders", folder / "runs", None), ("PostgreSQL", url, server.data / "postmaster.pid")]
        for name, where, postmaster in stores:
            options = ["--store", str(where)] if postmaster else ["--run-dir", str(where)]
            many, one = (
                stack.enter_context(served(folder, str(flows), *options, workers=n)) for n in (workers, 1)
            )
            against = [
                Figure(
                    f"steps/s, {RUNS} runs, serve --workers {workers}, {name}",
                    f"{RUNS} programs in process, {name}",
                    target=">= 0.8",
                    unit="/s",
                ),
                Figure(
                    f"steps/s, {RUNS} runs, serve --workers {workers}, {name}",
                    f"serve --workers 1, {name}",
                    unit="/s",
                ),
            ]
            sides = Sides(many, one, where, folder, postmaster, steps)
            spent[name] = [sides.round(against, tag) for tag in range(rounds)]
            figures += against
    report("serve_workers", figures, rounds)
    for name, measured in spent.items():
        m = {field: statistics.median(getattr(r, field) for r in measured) for field in Spent._fields}
        ceiling = 1000 * workers / (m["workers"] + m["clients"] + m["database"])  # the cores all busy
        print(
            f"    {name}: CPU per step through the server: workers {m['workers']:.2f} ms, "
            f"clients {m['clients']:.2f} ms, PostgreSQL {m['database']:.2f} ms "
            f"({workers} cores: at most {ceiling:.0f} steps/s); "
            f"the busiest worker answered {m['busiest']:.0%} of the steps"
        )
    return figures


class Sides(NamedTuple):
    """What a round measures on one store: N workers, 1 worker, and `RUNS` programs in process."""

    many: Served
    one: Served
    where: str | Path
    folder: Path
    postmaster: Path | None
    steps: int

    def round(self, against: list[Figure], tag: int) -> Spent:
        """One round of the three, in an order that rotates (a drift falls on all); the
        figures get theirs, and N workers' CPU is returned."""
        measured: dict[str, Any] = {}
        order = ["theirs", "many", "one"]
        for side in order[tag % 3 :] + order[: tag % 3]:
            if side == "theirs":
                measured[side] = concurrently(
                    "ours", self.where, self.folder, 1, self.steps, tag, clients=RUNS
                )[0]
            else:
                measured[side] = _round(getattr(self, side), self.postmaster, self.steps)
        sync = None if self.postmaster else sync_latency(self.folder)
        against[0].add(measured["many"].rate, measured["theirs"], sync)
        against[1].add(measured["many"].rate, measured["one"].rate, sync)
        return measured["many"]  # type: ignore[no-any-return]


def _round(instance: Served, postmaster: Path | None, steps: int) -> Spent:
    context = multiprocessing.get_context("spawn")  # no fork of this program's threads
    barrier, out = context.Barrier(CLIENT_PROGRAMS + 1, timeout=300), context.Queue()
    clients = [
        context.Process(target=_client, args=(instance.url, RUNS // CLIENT_PROGRAMS, steps, barrier, out))
        for _ in range(CLIENT_PROGRAMS)
    ]
    for client in clients:
        client.start()
    barrier.wait()  # every run past its intake
    workers, logged = _children(instance.pid) or [instance.pid], len(instance.log())
    before = cpu_seconds(workers), postgres_cpu(postmaster) if postmaster else 0.0
    results = [out.get() for _ in clients]
    used = cpu_seconds(workers) - before[0], (postgres_cpu(postmaster) if postmaster else 0.0) - before[1]
    for client in clients:
        client.join()
    total = RUNS * steps
    wall = max(end for _, end, _ in results) - min(start for start, _, _ in results)
    ms = 1000 / total
    answered = Counter(line.split()[-1] for line in instance.log()[logged:] if " tools/call step " in line)
    busiest = max(answered.values()) / sum(answered.values())  # a line or two may still be on its way
    return Spent(total / wall, used[0] * ms, sum(cpu for _, _, cpu in results) * ms, used[1] * ms, busiest)


def _children(pid: int) -> list[int]:
    """The worker pids of a `serve --workers` supervisor (none: it serves itself)."""
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def _client(url: str, runs: int, steps: int, barrier: Any, out: Any) -> None:
    out.put(asyncio.run(_confirms(url, runs, steps, barrier)))


async def _confirms(url: str, runs: int, steps: int, barrier: Any) -> tuple[float, float, float]:
    """`runs` runs, each on a connection of its own, prepared; then, after the barrier,
    `steps` confirmations of each, the runs at once: the start, the end, the CPU seconds."""
    connections = [await Connection.open(url) for _ in range(runs)]
    directives = [await _past_intake(connection) for connection in connections]
    await asyncio.to_thread(barrier.wait)
    start, cpu = time.time(), time.process_time()
    await asyncio.gather(*(_confirm(c, d, steps) for c, d in zip(connections, directives, strict=True)))
    took = time.time(), time.process_time() - cpu
    for connection in connections:
        connection.close()
    return start, *took


async def _past_intake(connection: Connection) -> dict[str, Any]:
    prepare = {"action": "prepare", "workflowId": "bench", "parentExecutionId": "bench"}
    prepared = await connection.call("start", prepare)
    directive = await connection.call(
        "start", {"action": "execute", "startAttemptId": prepared["startAttemptId"]}
    )
    ready = [
        {"action": t["action"], "expected_result": t["expected_result"]} for t in directive["ready_tasks"]
    ]
    at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
    return await connection.call("step", {**at, "tasks": ready, "progress_checklist_outcome": "ready"})


async def _confirm(connection: Connection, directive: dict[str, Any], steps: int) -> None:
    for n in range(steps):
        at = {"processId": directive["processId"], "attemptId": directive["attemptId"]}
        directive = await connection.call(
            "step", {**at, "evidence": f"checked {n}", "progress_execution_outcome": "done"}
        )


class Connection:
    """`tools/call` as one POST on a keep-alive connection, over asyncio's streams: a few
    µs of CPU a call at the client."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, url: str) -> None:
        where = urlsplit(url)
        self.reader, self.writer, self.path, self.sent = reader, writer, where.path, 0
        given = {"host": where.netloc, **HEADERS}  # the SDK checks the host against the one served
        self.head = "".join(f"{name}: {value}\r\n" for name, value in given.items())

    @classmethod
    async def open(cls, url: str) -> Connection:
        where = urlsplit(url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        return cls(reader, writer, url)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        body = request(self.sent, tool, arguments)
        start = f"POST {self.path} HTTP/1.1\r\n{self.head}content-length: {len(body)}\r\n\r\n"
        self.writer.write(start.encode() + body)
        status, _, rest = (await self.reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        headers = {k.lower(): v for k, v in (line.split(b": ", 1) for line in rest.strip().split(b"\r\n"))}
        answer = await self.reader.readexactly(int(headers[b"content-length"]))
        assert status.split()[1] == b"200", (status, answer)
        return result(answer, self.sent)

    def close(self) -> None:
        self.writer.close()


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
