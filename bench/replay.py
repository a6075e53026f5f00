"""Replay speed: `todoflow replay` of a run with 1,000 confirmations against its own
definition (every entry offered to a new engine), in a warm process, against resuming
the same run in the same rounds: as `todoflow.resume` does it (its snapshot at entry
1,000, then the entries since) and with the snapshot set aside (the whole journal folded,
as for a run opened before its first snapshot).

    .venv/bin/python -m bench.replay
"""

from __future__ import annotations

import shutil
import statistics

from bench.resume import SAMPLES, STEPS, TASKS, finished_run, median_time, resume
from bench.runtime import source
from bench.scratch import scratch
from todoflow.runtime.definition import from_source
from todoflow.runtime.store.base import runs_at
from todoflow.runtime.views.replay import replay

ROUNDS = 7


def main() -> None:
    definition = from_source(source(STEPS, TASKS), "bench.todoflow").or_raise()
    with scratch() as folder:
        run_dir, process_id = finished_run(folder)
        folded = folder / "without-snapshot"
        shutil.copytree(run_dir, folded)
        (folded / process_id / "snapshot.json").unlink()
        runs = runs_at(run_dir)

        def replayed() -> None:
            report = replay(runs, process_id, definition, "bench.todoflow").report
            assert report.verdict == "compatible" and len(report.entries) == STEPS * TASKS + STEPS - 1

        replayed()  # warm: modules imported, as in a long-running process
        resume(folded, process_id)
        times: dict[str, list[float]] = {"replay": [], "resume": [], "folded": []}
        for _ in range(ROUNDS):
            times["resume"].append(median_time(lambda: resume(run_dir, process_id)))
            times["replay"].append(median_time(replayed))
            times["folded"].append(median_time(lambda: resume(folded, process_id)))
        assert not (folded / process_id / "snapshot.json").exists()  # resuming wrote none
    print(f"{ROUNDS} rounds of {SAMPLES}; medians, with the range of the ratios over the rounds")
    _line("todoflow.resume + first directive", times["resume"])
    _line("the same, the whole journal folded (no snapshot)", times["folded"])
    _line("replay against its own definition (1,009 entries)", times["replay"])
    for name, label in (("resume", "resume"), ("folded", "whole-journal resume")):
        ratios = [a / b for a, b in zip(times["replay"], times[name], strict=True)]
        spread = f"{min(ratios):.1f}-{max(ratios):.1f}"
        print(f"  replay / {label:<20s} {statistics.median(ratios):5.1f}x ({spread}; target <= 2)")


def _line(label: str, times: list[float]) -> None:
    print(f"{label:52s} {statistics.median(times) * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
