"""The derived files of one run, pinned: events.jsonl and todos/<step>.json byte for byte.

The run passes every kind of entry (a regular step, intake, confirmations, a teleport,
a revision that changes, adds and removes tasks, completion), so a change to what the
seed's consumers read shows up as a reviewable snapshot diff."""

from __future__ import annotations

from pathlib import Path

from syrupy.assertion import SnapshotAssertion

from ..support.runtime_helpers import confirm, intake, start, tasks, walk

FLOW = """\
workflow w "W" {
    regular prep "Prepare" {
        description "Get the tools ready."
    }
    todo_task work "Work" {
        description "Do the work."
    }
}
"""


def test_events_and_todos_of_a_run(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    engine, store = start(tmp_path, FLOW)
    revision = {
        "tasks": tasks("a", "B \u00e9", "d"),
        "resume_from_task": 2,
        "progress_checklist_outcome": "b reworded, c dropped, d added",
        "progress_execution_outcome": "a kept",
    }
    replies = [
        confirm(0),
        intake("a", "b", "c"),
        confirm(1),
        {"teleportTo": "teleport-revise-tasks"},
        revision,
        confirm(2),
        confirm(3),
    ]
    *_, final = walk(engine, replies)
    assert final.completed
    engine.close()
    files = {
        name: (store.folder / name).read_text(encoding="utf-8")
        for name in ("events.jsonl", "todos/work.json")
    }
    assert files == snapshot
