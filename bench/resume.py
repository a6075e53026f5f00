"""Resume speed at any distance from the last snapshot: opening a run and asking its first
directive, in a warm process, right after a snapshot (the best case: one entry to
replay) and right before the next one (the worst case: every entry since the last
snapshot replayed), each against, in the same rounds:

- the floor of what must be read: run.json and the snapshot parsed, the plan's files
  read, the journal's lines from the snapshot's offset to its end parsed (the lines
  resume folds, and no other), each with the fastest JSON reader at hand
  (`pydantic_core.from_json`, 3-4x `json.loads` on a journal line), as the store reads them;
- LangGraph's `get_state` of a thread with as many checkpoints, through a SQLite
  checkpointer opened for it (bench/peers.py), when it is installed.

    .venv/bin/python -m bench.resume
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from pydantic_core import from_json

import todoflow
from bench import peers
from bench.measure import Figure, median_time, report, sync_latency
from bench.runtime import source
from bench.scratch import scratch
from todoflow.runtime import process
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine
from todoflow.runtime.store.folder import JOURNAL, SNAPSHOT

ROUNDS, SAMPLES = 7, 30
STEPS, TASKS = 30, 100  # long enough to pass a few snapshots (a checklist holds at most 100 tasks)


def advance(engine: Engine, entries: int) -> None:
    """Step the run until its journal holds `entries` entries: the ready checklist passed on
    at each intake, then a confirmation per task."""
    directive = engine.directive()
    while directive.state.seq < entries:
        assert not directive.completed, f"the run ends before entry {entries}"
        ready = directive.ready_reply()
        if ready is not None:
            directive = engine.step(directive.attempt_id, ready, by="caller")
        else:
            seq = directive.state.seq
            reply = {"evidence": f"checked {seq}", "progress_execution_outcome": f"done {seq}"}
            directive = engine.step(directive.attempt_id, reply)


def snapshot_seq(folder: Path) -> int:
    """The entry the run folder's snapshot was taken at (0: none)."""
    try:
        return int(json.loads((folder / SNAPSHOT).read_bytes())["state"]["seq"]) + 1
    except FileNotFoundError:
        return 0


def new_run(folder: Path, process_id: str) -> tuple[Engine, Path]:
    definition = from_source(source(STEPS, TASKS), "bench.todoflow").or_raise()
    engine = process.start(definition, folder / "runs", workspace=folder, process_id=process_id)
    return engine, folder / "runs" / process_id


def snapshot_points(folder: Path) -> list[int]:
    """The entries at which a run of the workflow writes its snapshots."""
    engine, run = new_run(folder, "points")
    points, last = [], 0
    with engine:
        directive = engine.directive()
        while not directive.completed:
            advance(engine, directive.state.seq + 1)
            directive = engine.directive()
            taken = snapshot_seq(run)
            if taken != last:
                points.append(directive.state.seq)
                last = taken
    return points


def cases(folder: Path) -> dict[str, int]:
    """How many entries a run holds in the best case (a snapshot was just taken) and in the
    worst (the next one is one entry away), at the widest gap between two snapshots."""
    points = snapshot_points(folder)
    assert len(points) >= 2, f"the run wrote {len(points)} snapshots; make it longer"
    gaps = list(itertools.pairwise(points))
    start, end = max(gaps, key=lambda gap: gap[1] - gap[0])
    return {"right after a snapshot": start, "right before the next": end - 1}


def stopped_run(folder: Path, process_id: str, entries: int) -> Path:
    """A run stopped with `entries` entries in its journal; its run folder."""
    engine, run = new_run(folder, process_id)
    with engine:
        advance(engine, entries)
    return run


def resume(run_dir: Path, process_id: str) -> None:
    with todoflow.resume(process_id, run_dir=run_dir) as engine:
        engine.directive()


def floor(run: Path) -> None:
    """What resume must read: run.json, the plan's files, the snapshot and the journal's
    lines after it, each parsed but the plan (read once per process)."""
    from_json((run / "run.json").read_bytes())
    for name in ("plan.json", "step_config.json", "ready_tasks.json"):
        path = run / "plan" / name
        if path.exists():
            path.read_bytes()
    offset = 0
    if (run / SNAPSHOT).exists():
        offset = from_json((run / SNAPSHOT).read_bytes())["offset"]
    with (run / JOURNAL).open("rb") as journal:
        journal.seek(offset)
        data = journal.read()
    end = data.find(b"\0")
    for line in (data if end < 0 else data[:end]).splitlines():
        from_json(line)


def main() -> list[Figure]:
    figures: list[Figure] = []
    with scratch() as folder:
        found = cases(folder)
        runs = {
            name: stopped_run(folder, f"run-{n}", entries) for n, (name, entries) in enumerate(found.items())
        }
        threads = {}
        if peers.available():
            for n, (name, entries) in enumerate(found.items()):
                thread = peers.Thread(folder / f"langgraph-{n}.sqlite", TASKS)
                for index in range(entries - 1):
                    thread.confirm(index)
                threads[name] = thread
        else:
            print(peers.MISSING)
        for run in runs.values():
            resume(run.parent, run.name)  # warm: modules imported, the plan read once
        for name, run in runs.items():
            label = f"resume + first directive, {name} ({found[name]} entries)"
            against_floor = Figure(label, "floor: what must be read", target="<= 2.0", unit="ms")
            against_peer = Figure(label, "LangGraph get_state", target="<= 1.5", unit="ms")
            for _ in range(ROUNDS):
                sync = sync_latency(folder)
                before = median_time(lambda run=run: floor(run), SAMPLES)
                ours = median_time(lambda run=run: resume(run.parent, run.name), SAMPLES)
                after = median_time(lambda run=run: floor(run), SAMPLES)
                against_floor.add(ours, (before + after) / 2, sync)
                if name in threads:
                    peer = median_time(threads[name].resume, SAMPLES)
                    against_peer.add(ours, peer, sync)
            figures.append(against_floor)
            if against_peer.ratios:
                figures.append(against_peer)
        for thread in threads.values():
            thread.close()
    report("resume", figures, ROUNDS)
    return figures


if __name__ == "__main__":
    main()
