"""The seed's vocabulary, derived from the journal: events.jsonl and todos/<step>.json.

Both are derived data: they can be rebuilt from the journal at any time, so they
are written without fsync and rebuilt after a crash. Evidence appears only here, in
the history (`TodoTaskItemCompleted.evidence`), never in todos, progress or results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic_core

from .entries import (
    ORCHESTRATOR,
    Confirm,
    Continue,
    CreateTodo,
    Delegate,
    Entry,
    FastPathFailed,
    FastPathStarted,
    LlmCall,
    RaiseTurns,
    Revise,
    SubAgentDone,
    SubAgentFailed,
    SubmitTasks,
    Teleport,
    UpdateTodo,
)
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
    reply and the journal call it `progress_execution_outcome`. The seed's `created_by`,
    `updated_by` and `completed_by` are always `orchestrator`; `agent` says who did it
    (`orchestrator`, a route id, or `generic`)."""
    assert before.step_id is not None
    step = plan.step(before.step_id)
    events: list[Event] = []
    head = _head(step, entry, process_id)

    def event(name: str, **fields: Any) -> None:
        events.append({"event": name, **head, **fields})

    match entry:
        case Confirm():
            events += _confirmed(step, before, settled, entry, head, ORCHESTRATOR)
        case Teleport():
            event(
                "TodoTaskRevisionStarted", todo_id=_todo_id(before.position), reason="teleport-revise-tasks"
            )
        case SubmitTasks() | Revise():
            _list_changes(before, settled, entry, event)
        case Delegate() | Continue():
            event("TodoTaskRouteSelected", **_decision(step, settled, entry))
        case SubAgentDone():
            route = step.route(entry.agent)
            if route is not None:
                event(
                    "TodoTaskDelegationValidated",
                    todo_id=_todo_id(entry.position),
                    route_id=route.id,
                    sub_step_id=route.step_id,
                    passed=entry.passed,
                    reason=entry.reason,
                    files=[{"path": path, "sha256": digest} for path, digest in entry.files],
                )
            if entry.passed:
                if route is not None:
                    event(
                        "TodoTaskLearningRecorded",
                        learning_id=learning_id(process_id, entry.seq),
                        route_id=route.id,
                        sub_step_id=route.step_id,
                        todo_id=_todo_id(entry.position),
                    )
                events += _confirmed(step, before, settled, entry, head, entry.agent)
            else:
                event(
                    "TodoTaskDelegationFailed",
                    todo_id=_todo_id(entry.position),
                    agent=entry.agent,
                    reason=entry.reason,
                )
        case SubAgentFailed():
            event(
                "TodoTaskDelegationFailed",
                todo_id=_todo_id(entry.position),
                agent=entry.agent,
                reason=entry.failed,
            )
        case CreateTodo():
            event(
                "TodoTaskItemCreated",
                todo_id=_todo_id(settled.total),
                title=entry.title,
                description=entry.description,
                priority=entry.priority,
                created_by=ORCHESTRATOR,
                agent=ORCHESTRATOR,
            )
        case UpdateTodo():
            event(
                "TodoTaskItemUpdated",
                todo_id=_todo_id(entry.position),
                title=before.tasks[entry.position - 1].action,
                old_status=before.status(entry.position),
                new_status=settled.status(entry.position),
                notes=entry.notes or "",
                updated_by=ORCHESTRATOR,
                agent=entry.agent,
            )
        case RaiseTurns():
            event(
                "TodoTaskTurnsRaised", execution_max_turns=entry.execution_max_turns, turns_used=before.turns
            )
        case FastPathStarted():
            event("TodoTaskFastPathStarted", step_title=step.title, script_sha256=entry.script_sha256)
        case FastPathFailed():
            event("TodoTaskFastPathFailed", step_title=step.title, reason=entry.reason)
        case LlmCall():
            event(
                "LLMCallCompleted",
                agent=entry.agent,
                provider=entry.provider,
                model_id=entry.model_id,
                rule=entry.rule,
                prompt_tokens=entry.prompt_tokens,
                completion_tokens=entry.completion_tokens,
                latency_ms=entry.latency_ms,
            )
    if settled.step_complete:
        name = "TodoTaskStepCompleted" if step.kind == "todo_task" else "StepCompleted"
        event(
            name,
            step_title=step.title,
            total_iterations=settled.turns,
            total_todos_count=settled.total,
            completed_count=settled.total,
            completion_reason="every task confirmed",
            next_step_id=step.next_step_id,
        )
    return events


def learning_id(process_id: str, seq: int) -> str:
    """A learning's id: the process and the journal entry that proves it."""
    return f"{process_id}:{seq}"


def _decision(step: RunStep, settled: ProcessState, entry: Delegate | Continue) -> Event:
    """TodoTaskRouteSelected's fields (the seed's), for a decision of the orchestrator."""
    delegate = entry if isinstance(entry, Delegate) else None
    route = step.route(delegate.selected_route_id) if delegate and delegate.selected_route_id else None
    return {
        "step_title": step.title,
        "iteration": settled.turns,
        "next_action": entry.TYPE,
        "selected_route_id": route.id if route else None,
        "selected_route_name": route.name if route else None,
        "use_generic_agent": bool(delegate and delegate.use_generic_agent),
        "todo_id_to_execute": _todo_id(entry.position),
        "todo_title": settled.tasks[entry.position - 1].action,
        "instructions_to_sub_agent": delegate.instructions_to_sub_agent if delegate else None,
        "success_criteria_for_sub_agent": delegate.success_criteria_for_sub_agent if delegate else None,
        "selection_reasoning": entry.selection_reasoning,
        "all_tasks_complete": entry.all_tasks_complete,
        "progress_summary": entry.progress_summary,
    }


def _confirmed(
    step: RunStep,
    before: ProcessState,
    settled: ProcessState,
    entry: Confirm | SubAgentDone,
    head: Event,
    agent: str,
) -> list[Event]:
    """The common step: two events, whatever the length of the list (spelled out: this
    runs at every confirmation)."""
    position = before.position
    if step.kind != "todo_task":
        return [
            {
                "event": "StepConfirmed",
                **head,
                "result": entry.progress_execution_outcome,
                "evidence": entry.evidence,
            }
        ]
    events = [
        {
            "event": "TodoTaskItemCompleted",
            **head,
            "todo_id": _todo_id(position),
            "title": before.tasks[position - 1].action,
            "completed_by": ORCHESTRATOR,
            "agent": agent,
            "result": entry.progress_execution_outcome,
            "evidence": entry.evidence,
        }
    ]
    if not settled.step_complete:
        following = settled.position
        events.append(
            {
                "event": "TodoTaskItemUpdated",
                **head,
                "todo_id": _todo_id(following),
                "title": settled.tasks[following - 1].action,
                "old_status": before.status(following),
                "new_status": settled.status(following),
                "notes": "",
                "updated_by": ORCHESTRATOR,
                "agent": ORCHESTRATOR,
            }
        )
    return events


def _list_changes(
    before: ProcessState, settled: ProcessState, entry: SubmitTasks | Revise, event: Callable[..., None]
) -> None:
    """Events for a new or revised checklist: each item created, changed, moved on or removed."""
    fresh_list = isinstance(entry, SubmitTasks)
    if isinstance(entry, Revise):
        event("TodoTaskChecklistRevised", resume_from_task=entry.resume_from_task, total=settled.total)
    for index, task in enumerate(settled.tasks):
        position = index + 1
        todo = _todo_id(position)
        fresh = fresh_list or index >= before.total
        old = "pending" if fresh else before.status(position)
        changed = not fresh and before.tasks[index] != task
        new = settled.status(position)
        by = {"agent": ORCHESTRATOR}
        if fresh:
            event(
                "TodoTaskItemCreated",
                todo_id=todo,
                title=task.action,
                description=task.expected_result,
                priority=task.priority,
                created_by=ORCHESTRATOR,
                **by,
            )
        if new == "completed" and (old != "completed" or changed):
            event("TodoTaskItemCompleted", todo_id=todo, title=task.action, completed_by=ORCHESTRATOR, **by)
        elif new != old or changed:
            event(
                "TodoTaskItemUpdated",
                todo_id=todo,
                title=task.action,
                old_status=old,
                new_status=new,
                notes="revised" if changed else "",
                updated_by=ORCHESTRATOR,
                **by,
            )
    for index in range(settled.total, before.total):
        event(
            "TodoTaskItemUpdated",
            todo_id=_todo_id(index + 1),
            title=before.tasks[index].action,
            old_status=before.status(index + 1),
            new_status="removed",
            notes="revised",
            updated_by=ORCHESTRATOR,
            agent=ORCHESTRATOR,
        )


def todos(step: RunStep, state: ProcessState) -> str:
    """todos.json of `step` as `state` holds it (settled: a complete step is all done).

    Built in `formats.Todos`'s field order and written as its `to_json` would write it,
    without validating 100 items at every step's completion; a test holds the two equal."""
    statuses = [state.status(position) for position in range(1, state.total + 1)]
    items = []
    for index, task in enumerate(state.tasks):
        created, updated = state.times[index] if index < len(state.times) else ("", "")
        mark = state.mark(index + 1)
        item: dict[str, Any] = {
            "id": _todo_id(index + 1),
            "title": task.action,
            "description": task.expected_result,
            "priority": task.priority,
            "status": statuses[index],
        }
        if mark.assigned is not None:
            item["assigned_agent"] = mark.assigned
        if statuses[index] == "completed" and index < len(state.progress.results):
            item["result"] = state.progress.results[index]
        if mark.notes is not None:
            item["notes"] = mark.notes
        item["created_at"], item["updated_at"] = created, updated
        items.append(item)
    summary = {
        "total": len(items),
        "completed": statuses.count("completed"),
        "in_progress": statuses.count("in_progress"),
        "open": statuses.count("pending") + statuses.count("blocked"),
    }
    data = {
        "step_id": step.id,
        "objective": step.description or step.title,
        "todos": items,
        "summary": summary,
    }
    return pydantic_core.to_json(data, indent=2).decode() + "\n"
