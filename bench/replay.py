"""Replay speed: `todoflow replay` of a run with 1,000 confirmations against its own
definition (every entry offered to a new engine), in a warm process, against resuming
the same run in the same rounds: as `todoflow.resume` does it (from its last snapshot)
and with the snapshot set aside (the whole journal folded, as for a run opened before
its first snapshot).

    .venv/bin/python -m bench.replay
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from bench.measure import Figure, median_time, report
from bench.resume import resume
from bench.runtime import replies, source
from bench.scratch import scratch
from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import RunDefinition, from_source
from todoflow.runtime.store.base import runs_at
from todoflow.runtime.views.replay import replay

ROUNDS, SAMPLES = 7, 10
STEPS, TASKS = 10, 100  # 1,000 confirmations (a checklist holds at most 100 tasks)


def finished_run(folder: Path, definition: RunDefinition) -> tuple[Path, str]:
    """A run of 10 checklists of 100 tasks, stopped before its last confirmation."""
    run_dir = folder / "runs"
    engine = process.start(definition, run_dir, workspace=folder, process_id="replayed")
    script = replies(STEPS, TASKS)[:-1]  # the run stays open: its first directive is a task
    assert drive(engine, ScriptedAgent(script, folder), io.StringIO()) == "stopped"
    engine.close()
    return run_dir, engine.process_id


def main() -> list[Figure]:
    definition = from_source(source(STEPS, TASKS), "bench.todoflow").or_raise()
    entries = STEPS * TASKS + STEPS - 1
    against_resume = Figure(
        f"replay against its own definition ({entries:,} entries)",
        "todoflow.resume + first directive",
        unit="ms",
    )
    against_folded = Figure(
        f"replay against its own definition ({entries:,} entries)",
        "resume folding the whole journal (no snapshot)",
        target="<= 2.0",
        unit="ms",
    )
    with scratch() as folder:
        run_dir, process_id = finished_run(folder, definition)
        folded = folder / "without-snapshot"
        shutil.copytree(run_dir, folded)
        (folded / process_id / "snapshot.json").unlink()
        runs = runs_at(run_dir)

        def replayed() -> None:
            found = replay(runs, process_id, definition, "bench.todoflow").report
            assert found.verdict == "compatible" and len(found.entries) == entries

        replayed()  # warm: modules imported, as in a long-running process
        resume(folded, process_id)
        for _ in range(ROUNDS):
            resumed = median_time(lambda: resume(run_dir, process_id), SAMPLES)
            took = median_time(replayed, SAMPLES)
            whole = median_time(lambda: resume(folded, process_id), SAMPLES)
            against_resume.add(took, resumed)
            against_folded.add(took, whole)
        assert not (folded / process_id / "snapshot.json").exists()  # resuming wrote none
    report("replay", [against_resume, against_folded], ROUNDS)
    return [against_resume, against_folded]


if __name__ == "__main__":
    main()
