"""Helpers for runtime tests: a process from source text, replies, reading a run folder,
whether a process still runs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from todoflow.runtime import process
from todoflow.runtime.definition import from_source
from todoflow.runtime.directive import Directive
from todoflow.runtime.engine import Engine
from todoflow.runtime.store.folder import FolderStore


class ChecklistModel:
    """A stand-in for the runtime's model of a compiled machine: `remaining` tasks."""

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining

    def has_task(self) -> bool:
        return self.remaining > 0

    def past_end(self) -> bool:
        return self.remaining <= 0


class Clock:
    """A deterministic clock: one second per reading."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> str:
        self.ticks += 1
        return f"2026-01-01T00:00:{self.ticks % 60:02d}.{self.ticks // 60:03d}Z"


def start(tmp: Path, source: str, process_id: str = "p-1", ready: Any = None) -> tuple[Engine, FolderStore]:
    definition = from_source(source, "flow.todoflow").or_raise()
    workspace = tmp / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    engine = process.start(
        definition, tmp / "runs", workspace=workspace, ready=ready, process_id=process_id, clock=clock
    )
    engine.close()
    return process.open_process(tmp / "runs", process_id, clock=clock)


def read_journal(folder: Path) -> list[dict[str, Any]]:
    """The complete lines of a run folder's journal as their JSON, as written (its zero tail
    and a torn last line left out): what tests pin byte for byte."""
    try:
        data = (folder / "journal.jsonl").read_bytes()
    except FileNotFoundError:
        return []
    end = data.find(b"\0")
    data = data if end < 0 else data[:end]
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def confirm(n: int) -> dict[str, str]:
    return {"evidence": f"evidence {n}", "progress_execution_outcome": f"outcome {n}"}


def tasks(*actions: str) -> list[dict[str, str]]:
    return [{"action": a, "expected_result": f"{a} is done"} for a in actions]


def intake(*actions: str) -> dict[str, Any]:
    return {"tasks": tasks(*actions), "progress_checklist_outcome": f"{len(actions)} tasks"}


def folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def walk(engine: Engine, replies: list[dict[str, Any]]) -> Iterator[Directive]:
    directive = engine.directive()
    for reply in replies:
        directive = engine.step(directive.attempt_id, reply)
        yield directive


CHECKLIST = """\
workflow w "W" {
    todo_task work "Work" {
        description "Do the work."
        output "out.txt"
    }
}
"""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
