"""What journaling a command as it starts adds to a `run_command` call: the call of
`true` with the driver's journal told of each start (`commands.Journal.started`: one
journal line and its sync in a run folder, the leader's start read from /proc) against
the same call on the same toolset told of nothing, called turn by turn in the same run;
and the resumed driver's look for what a killed runner left (`commands.stop_left`) over
a journal of many commands, against reading that journal's entries.

    .venv/bin/python -m bench.commands
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.measure import Figure, report, sync_latency
from bench.scratch import scratch
from todoflow.runtime import process
from todoflow.runtime.agents.commands import Journal, stop_left
from todoflow.runtime.agents.workspace_tools import WorkspaceTools
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine

ROUNDS, CALLS = 7, 40
FLOW = 'workflow w "W" {\n    todo_task work "Work" {\n        description "Do the work."\n    }\n}\n'
INTAKE = {"tasks": [{"action": "build", "expected_result": "built"}], "progress_checklist_outcome": "1"}


def _engine(folder: Path) -> Engine:
    """A run at its work node, in a run folder (a journal synced at each entry)."""
    engine = process.start(from_source(FLOW, "flow.todoflow").or_raise(), folder / "runs", workspace=folder)
    engine.step(engine.directive().attempt_id, INTAKE)
    return engine


def _interleaved(bare: Callable[[], object], ours: Callable[[], object]) -> tuple[float, float]:
    """The median call of each, the two called turn by turn (a slow spell falls on both)."""
    spent: tuple[list[float], list[float]] = ([], [])
    for _ in range(CALLS):
        for side, action in enumerate((bare, ours)):
            start = time.perf_counter()
            action()
            spent[side].append(time.perf_counter() - start)
    return statistics.median(spent[1]), statistics.median(spent[0])


def measure(folder: Path) -> list[Figure]:
    engine = _engine(folder)
    journal = Journal(engine)
    journal.asking(engine.directive())
    plain, told = WorkspaceTools(folder, shell=True), WorkspaceTools(folder, shell=True)
    told.on_start(journal.started)
    deadline = time.monotonic() + 3600
    call = Figure(
        "run_command `true`, journaled as it starts",
        "the same call, not journaled, same toolset",
        unit="ms",
    )
    look = Figure(
        f"stop_left over a journal of {ROUNDS * CALLS} open commands", "reading its entries", unit="ms"
    )
    for _ in range(ROUNDS):
        call.add(
            *_interleaved(
                lambda: plain.call("run_command", {"command": "true"}, deadline),
                lambda: told.call("run_command", {"command": "true"}, deadline),
            ),
            sync_latency(folder),
        )
    for _ in range(ROUNDS):
        look.add(
            *_interleaved(engine.store.entries, lambda: stop_left(engine, io.StringIO())),
        )
    engine.close()
    return [call, look]


def main() -> list[Figure]:
    with scratch() as folder:
        figures = measure(folder)
    report(f"commands journaled as they start ({CALLS} calls of each a round, interleaved)", figures, ROUNDS)
    return figures


if __name__ == "__main__":
    main()
