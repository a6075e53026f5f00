"""Journal entries: the closed set of what can happen to a process, as frozen values.

The engine builds one entry from each accepted reply; `state.settle` folds it into the
process state and `events.entry_events` derives the seed's events from it, both by
matching on its type, so mypy sees every kind handled. Each kind has one JSON form, a
line of journal.jsonl (`to_json`, `entry_from_json`). A field keeps the name it has in
the reply (`progress_execution_outcome`, not `outcome`) from the MCP tool to the journal;
the seed's event formats rename it where they name it otherwise (`result`).

Journals written before entries were typed still load: their outcome fields were named
`outcome` (confirm), `checklist_outcome` (submit_tasks, revise) and `work_outcome`
(revise). To add a kind: a class here with its `TYPE`, its JSON form in `to_json` and
`entry_from_json`, a case in `state.settle` and in `events.entry_events` (mypy's
exhaustiveness check on `Entry` points at each), and a section in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from .plan import Task

By: TypeAlias = str  # who gave the reply: `agent`, or `caller` (a ready checklist passed on for it)


@node
class SubmitTasks:
    """Intake: the step's checklist. `tasks` is None when the step's ready checklist was
    passed on unchanged (the run's plan holds it, so the entry need not copy it)."""

    TYPE: ClassVar[str] = "submit_tasks"
    seq: int
    at: str
    by: By
    step: str
    tasks: tuple[Task, ...] | None
    progress_checklist_outcome: str


@node
class Confirm:
    """The current task (position) done, with its evidence."""

    TYPE: ClassVar[str] = "confirm"
    seq: int
    at: str
    by: By
    step: str
    position: int
    evidence: str
    progress_execution_outcome: str


@node
class Teleport:
    """From work to revise: the checklist itself is wrong."""

    TYPE: ClassVar[str] = "teleport"
    seq: int
    at: str
    by: By
    step: str
    position: int


@node
class Revise:
    """The full corrected checklist, and where to resume."""

    TYPE: ClassVar[str] = "revise"
    seq: int
    at: str
    by: By
    step: str
    tasks: tuple[Task, ...]
    resume_from_task: int
    progress_checklist_outcome: str
    progress_execution_outcome: str


Entry: TypeAlias = SubmitTasks | Confirm | Teleport | Revise


def to_json(entry: Entry) -> dict[str, Any]:
    """The entry as its journal line holds it (keys in this order)."""
    head = {"seq": entry.seq, "at": entry.at, "by": entry.by, "step": entry.step, "type": entry.TYPE}
    match entry:
        case Confirm():
            return head | {
                "position": entry.position,
                "evidence": entry.evidence,
                "progress_execution_outcome": entry.progress_execution_outcome,
            }
        case SubmitTasks():
            listed: dict[str, Any] = (
                {"ready": True} if entry.tasks is None else {"tasks": [t.as_dict() for t in entry.tasks]}
            )
            return head | listed | {"progress_checklist_outcome": entry.progress_checklist_outcome}
        case Teleport():
            return head | {"position": entry.position}
        case Revise():
            return head | {
                "tasks": [t.as_dict() for t in entry.tasks],
                "resume_from_task": entry.resume_from_task,
                "progress_checklist_outcome": entry.progress_checklist_outcome,
                "progress_execution_outcome": entry.progress_execution_outcome,
            }


class EntryFormatError(TodoflowError):
    """A journal line that is JSON but not an entry of a known kind."""


def entry_from_json(data: Mapping[str, Any]) -> Entry:
    """The entry a journal line holds, in today's form or the one before entries were typed."""
    try:
        kind = data["type"]
        seq, at, by, step = data["seq"], data["at"], data.get("by", "agent"), data["step"]
        if kind == Confirm.TYPE:
            outcome = data.get("progress_execution_outcome", data.get("outcome"))
            return Confirm(seq, at, by, step, data["position"], data["evidence"], outcome)
        if kind == SubmitTasks.TYPE:
            tasks = None if data.get("ready") else tuple(map(Task.from_dict, data["tasks"]))
            summary = data.get("progress_checklist_outcome", data.get("checklist_outcome"))
            return SubmitTasks(seq, at, by, step, tasks, summary)
        if kind == Teleport.TYPE:
            return Teleport(seq, at, by, step, data["position"])
        if kind == Revise.TYPE:
            return Revise(
                seq,
                at,
                by,
                step,
                tuple(map(Task.from_dict, data["tasks"])),
                data["resume_from_task"],
                data.get("progress_checklist_outcome", data.get("checklist_outcome")),
                data.get("progress_execution_outcome", data.get("work_outcome")),
            )
    except (KeyError, TypeError) as error:
        raise EntryFormatError(f"an entry without its field {error}") from None
    raise EntryFormatError(f"an entry of unknown type {kind!r}")
