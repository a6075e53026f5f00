"""Resume speed: opening a run with 1,000 confirmations and asking its first directive,
in a warm process, against a floor measured in the same run: reading that run's
snapshot and journal files and parsing them with `json.loads` (what any reader of the
run folder must at least do).

    .venv/bin/python -m bench.resume
"""

from __future__ import annotations

import io
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import todoflow
from bench.runtime import replies, source
from bench.scratch import scratch
from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import from_source

ROUNDS, SAMPLES = 7, 50
STEPS, TASKS = 10, 100  # 1,000 confirmations (a checklist holds at most 100 tasks)


def finished_run(folder: Path) -> tuple[Path, str]:
    """A run of 10 checklists of 100 tasks, stopped before its last confirmation."""
    definition = from_source(source(STEPS, TASKS), "bench.todoflow").or_raise()
    run_dir = folder / "runs"
    engine = process.start(definition, run_dir, workspace=folder, process_id="resume")
    script = replies(STEPS, TASKS)[:-1]  # the run stays open: its first directive is a task
    assert drive(engine, ScriptedAgent(script, folder), io.StringIO()) == "stopped"
    engine.close()
    return run_dir, engine.process_id


def resume(run_dir: Path, process_id: str) -> None:
    with todoflow.resume(process_id, run_dir=run_dir) as engine:
        directive = engine.directive()
    assert directive.role == "Task 100/100"


def floor(folder: Path) -> None:
    snapshot = json.loads((folder / "snapshot.json").read_bytes())
    data = (folder / "journal.jsonl").read_bytes()
    lines = [json.loads(line) for line in data[: data.index(b"\0")].splitlines()]
    assert snapshot["offset"] and len(lines) == STEPS * TASKS + STEPS - 1


def median_time(work: Callable[[], None]) -> float:
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    with scratch() as folder:
        run_dir, process_id = finished_run(folder)
        resume(run_dir, process_id)  # warm: modules imported, as in a long-running process
        ours, floors, ratios = [], [], []
        for _ in range(ROUNDS):
            before = median_time(lambda: floor(run_dir / process_id))
            took = median_time(lambda: resume(run_dir, process_id))
            after = median_time(lambda: floor(run_dir / process_id))
            ours.append(took)
            floors.append((before + after) / 2)
            ratios.append(took / floors[-1])
    print(f"{ROUNDS} rounds of {SAMPLES}; medians, with the range of the ratios over the rounds")
    print(f"{'floor: read + json.loads snapshot and journal':48s} {statistics.median(floors) * 1e3:7.2f} ms")
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    ratio = f"{statistics.median(ratios):5.2f}x floor ({spread}; target <= 2.0)"
    label = "todoflow.resume + first directive (1,000 steps)"
    print(f"{label:48s} {statistics.median(ours) * 1e3:7.2f} ms {ratio}")


if __name__ == "__main__":
    main()
