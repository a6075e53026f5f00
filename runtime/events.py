"""The seed's vocabulary, derived from the journal: events.jsonl and todos/<step>.json.

Both are derived data: they can be rebuilt from the journal at any time, so they
are written without fsync and rebuilt after a crash. Evidence appears only here, in
the history (`TodoTaskItemCompleted.evidence`), never in todos, progress or results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic_core

from .entries import Confirm, Entry, Revise, SubmitTasks, Teleport
from .plan import RunPlan, RunStep
from .state import ProcessState

Event = dict[str, Any]


def _todo_id(position: int) -> str:
    return f"todo_{position}"


def _head(step: RunStep, entry: Entry, process_id: str) -> Event:
    """The fields every event of one journal entry shares, after its name."""
    return {
        "process_id": process_id,
        "seq": entry.seq,
        "at": entry.at,
        "step_index": step.index,
        "step_path": f"steps[{step.index}]",
        "step_id": step.id,
    }


def entry_events(
    plan: RunPlan, before: ProcessState, settled: ProcessState, entry: Entry, process_id: str
) -> list[Event]:
    """The events one journal entry causes, from the states before and after it (at least one).

    The seed names a confirmation's outcome `result` (TodoTaskItemCompleted); the
    reply and the journal call it `progress_execution_outcome`."""
    assert before.step_id is not None
    step = plan.step(before.step_id)
    events: list[Event] = []
    head = _head(step, entry, process_id)

    def event(name: str, **fields: Any) -> None:
        events.append({"event": name, **head, **fields})

    match entry:
        case Confirm():
            _confirmed(step, before, settled, entry, head, events)
        case Teleport():
            event(
                "TodoTaskRevisionStarted", todo_id=_todo_id(before.position), reason="teleport-revise-tasks"
            )
        case SubmitTasks() | Revise():
            _list_changes(before, settled, entry, event)
    if settled.step_complete:
        name = "TodoTaskStepCompleted" if step.kind == "todo_task" else "StepCompleted"
        event(
            name,
            step_title=step.title,
            total_iterations=settled.step_replies,
            total_todos_count=settled.total,
            completed_count=settled.total,
            completion_reason="every task confirmed",
            next_step_id=step.next_step_id,
        )
    return events


def _confirmed(
    step: RunStep,
    before: ProcessState,
    settled: ProcessState,
    entry: Confirm,
    head: Event,
    events: list[Event],
) -> None:
    """The common step: two events, whatever the length of the list."""
    position = before.position
    if step.kind != "todo_task":
        events.append(
            {
                "event": "StepConfirmed",
                **head,
                "result": entry.progress_execution_outcome,
                "evidence": entry.evidence,
            }
        )
    else:  # spelled out: this runs at every confirmation
        events.append(
            {
                "event": "TodoTaskItemCompleted",
                **head,
                "todo_id": _todo_id(position),
                "title": before.tasks[position - 1].action,
                "completed_by": "orchestrator",
                "result": entry.progress_execution_outcome,
                "evidence": entry.evidence,
            }
        )
        if not settled.step_complete:
            following = settled.position
            events.append(
                {
                    "event": "TodoTaskItemUpdated",
                    **head,
                    "todo_id": _todo_id(following),
                    "title": settled.tasks[following - 1].action,
                    "old_status": "pending",
                    "new_status": "in_progress",
                    "notes": "",
                    "updated_by": "orchestrator",
                }
            )


def _list_changes(
    before: ProcessState, settled: ProcessState, entry: SubmitTasks | Revise, event: Callable[..., None]
) -> None:
    """Events for a new or revised checklist: each item created, changed, moved on or removed."""
    fresh_list = isinstance(entry, SubmitTasks)
    if isinstance(entry, Revise):
        event("TodoTaskChecklistRevised", resume_from_task=entry.resume_from_task, total=settled.total)
    old_statuses, new_statuses = _statuses(before), _statuses(settled)
    for index, task in enumerate(settled.tasks):
        todo = _todo_id(index + 1)
        fresh = fresh_list or index >= before.total
        old = "pending" if fresh else old_statuses[index]
        changed = not fresh and before.tasks[index] != task
        new = new_statuses[index]
        if fresh:
            event(
                "TodoTaskItemCreated",
                todo_id=todo,
                title=task.action,
                description=task.expected_result,
                priority="medium",
                created_by="orchestrator",
            )
        if new == "completed" and (old != "completed" or changed):
            event("TodoTaskItemCompleted", todo_id=todo, title=task.action, completed_by="orchestrator")
        elif new != old or changed:
            event(
                "TodoTaskItemUpdated",
                todo_id=todo,
                title=task.action,
                old_status=old,
                new_status=new,
                notes="revised" if changed else "",
                updated_by="orchestrator",
            )
    for index in range(settled.total, before.total):
        event(
            "TodoTaskItemUpdated",
            todo_id=_todo_id(index + 1),
            title=before.tasks[index].action,
            old_status=old_statuses[index],
            new_status="removed",
            notes="revised",
            updated_by="orchestrator",
        )


def _statuses(state: ProcessState) -> list[str]:
    out = []
    for position in range(1, state.total + 1):
        if position < state.position or state.step_complete:
            out.append("completed")
        elif position == state.position and state.node == "work":
            out.append("in_progress")
        else:
            out.append("pending")
    return out


def todos(step: RunStep, state: ProcessState) -> str:
    """todos.json of `step` as `state` holds it (settled: a complete step is all done).

    Built in `formats.Todos`'s field order and written as its `to_json` would write it,
    without validating 100 items at every step's completion; a test holds the two equal."""
    statuses = _statuses(state)
    items = []
    for index, task in enumerate(state.tasks):
        created, updated = state.times[index] if index < len(state.times) else ("", "")
        item = {
            "id": _todo_id(index + 1),
            "title": task.action,
            "description": task.expected_result,
            "priority": "medium",
            "status": statuses[index],
        }
        if statuses[index] == "completed" and index < len(state.progress.results):
            item["result"] = state.progress.results[index]
        item["created_at"], item["updated_at"] = created, updated
        items.append(item)
    summary = {
        "total": len(items),
        "completed": statuses.count("completed"),
        "in_progress": statuses.count("in_progress"),
        "open": statuses.count("pending"),
    }
    data = {
        "step_id": step.id,
        "objective": step.description or step.title,
        "todos": items,
        "summary": summary,
    }
    return pydantic_core.to_json(data, indent=2).decode() + "\n"
