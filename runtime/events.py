"""The seed's vocabulary, derived from the journal: events.jsonl and todos/<step>.json.

Both are derived data: they can be rebuilt from the journal at any time, so they
are written without fsync and rebuilt after a crash. Evidence appears only here, in
the history (`TodoTaskItemCompleted.evidence`), never in todos, progress or results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pydantic_core

from .entries import (
    ORCHESTRATOR,
    CommandStarted,
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
    ToolCalled,
    UpdateTodo,
    to_json,
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
    said = Said(step, before, settled, _head(step, entry, process_id), process_id)
    events = _EVENTS[type(entry)](said, entry)
    if settled.step_complete:
        name = "TodoTaskStepCompleted" if step.kind == "todo_task" else "StepCompleted"
        events.append(
            said.event(
                name,
                step_title=step.title,
                total_iterations=settled.turns,
                total_todos_count=settled.total,
                completed_count=settled.total,
                completion_reason="every task confirmed",
                next_step_id=step.next_step_id,
            )
        )
    return events


class Said(NamedTuple):
    """What an entry's events are made of: its step, the states around it, their shared head."""

    step: RunStep
    before: ProcessState
    settled: ProcessState
    head: Event
    process_id: str

    def event(self, name: str, **fields: Any) -> Event:
        return {"event": name, **self.head, **fields}


Derive = Callable[[Said, Any], list[Event]]
_EVENTS: dict[type[Any], Derive] = {}  # one handler per entry kind: the seed's events it causes


def _derives(kind: type[Any]) -> Callable[[Derive], Derive]:
    def add(handler: Derive) -> Derive:
        _EVENTS[kind] = handler
        return handler

    return add


def derived_kinds() -> frozenset[type[Any]]:
    """The entry kinds `entry_events` has a handler for (a test holds it equal to `entries.KINDS`)."""
    return frozenset(_EVENTS)


@_derives(Confirm)
def _confirm(said: Said, entry: Confirm) -> list[Event]:
    return _confirmed(said.step, said.before, said.settled, entry, said.head, ORCHESTRATOR)


@_derives(Teleport)
def _teleport(said: Said, entry: Teleport) -> list[Event]:
    todo = _todo_id(said.before.position)
    return [said.event("TodoTaskRevisionStarted", todo_id=todo, reason="teleport-revise-tasks")]


@_derives(SubmitTasks)
@_derives(Revise)
def _list(said: Said, entry: SubmitTasks | Revise) -> list[Event]:
    events: list[Event] = []
    _list_changes(
        said.before, said.settled, entry, lambda name, **fields: events.append(said.event(name, **fields))
    )
    return events


@_derives(Delegate)
@_derives(Continue)
def _decided(said: Said, entry: Delegate | Continue) -> list[Event]:
    return [said.event("TodoTaskRouteSelected", **_decision(said.step, said.settled, entry))]


@_derives(SubAgentDone)
def _sub_agent_done(said: Said, entry: SubAgentDone) -> list[Event]:
    route = said.step.route(entry.agent)
    todo = _todo_id(entry.position)
    events = []
    if route is not None:
        files = [{"path": path, "sha256": digest} for path, digest in entry.files]
        events.append(
            said.event(
                "TodoTaskDelegationValidated",
                todo_id=todo,
                route_id=route.id,
                sub_step_id=route.step_id,
                passed=entry.passed,
                reason=entry.reason,
                files=files,
            )
        )
    if not entry.passed:
        return [*events, _delegation_failed(said, entry.position, entry.agent, entry.reason)]
    if route is not None:
        learning = learning_id(said.process_id, entry.seq)
        events.append(
            said.event(
                "TodoTaskLearningRecorded",
                learning_id=learning,
                route_id=route.id,
                sub_step_id=route.step_id,
                todo_id=todo,
            )
        )
    return events + _confirmed(said.step, said.before, said.settled, entry, said.head, entry.agent)


@_derives(SubAgentFailed)
def _sub_agent_failed(said: Said, entry: SubAgentFailed) -> list[Event]:
    return [_delegation_failed(said, entry.position, entry.agent, entry.failed)]


def _delegation_failed(said: Said, position: int, agent: str, reason: str | None) -> Event:
    return said.event("TodoTaskDelegationFailed", todo_id=_todo_id(position), agent=agent, reason=reason)


@_derives(CreateTodo)
def _create_todo(said: Said, entry: CreateTodo) -> list[Event]:
    created = said.event(
        "TodoTaskItemCreated",
        todo_id=_todo_id(said.settled.total),
        title=entry.title,
        description=entry.description,
        priority=entry.priority,
        created_by=ORCHESTRATOR,
        agent=ORCHESTRATOR,
    )
    return [created]


@_derives(UpdateTodo)
def _update_todo(said: Said, entry: UpdateTodo) -> list[Event]:
    updated = said.event(
        "TodoTaskItemUpdated",
        todo_id=_todo_id(entry.position),
        title=said.before.tasks[entry.position - 1].action,
        old_status=said.before.status(entry.position),
        new_status=said.settled.status(entry.position),
        notes=entry.notes or "",
        updated_by=ORCHESTRATOR,
        agent=entry.agent,
    )
    return [updated]


@_derives(RaiseTurns)
def _raise_turns(said: Said, entry: RaiseTurns) -> list[Event]:
    raised = said.event(
        "TodoTaskTurnsRaised", execution_max_turns=entry.execution_max_turns, turns_used=said.before.turns
    )
    return [raised]


@_derives(FastPathStarted)
def _fast_path_started(said: Said, entry: FastPathStarted) -> list[Event]:
    title = said.step.title
    return [said.event("TodoTaskFastPathStarted", step_title=title, script_sha256=entry.script_sha256)]


@_derives(FastPathFailed)
def _fast_path_failed(said: Said, entry: FastPathFailed) -> list[Event]:
    return [said.event("TodoTaskFastPathFailed", step_title=said.step.title, reason=entry.reason)]


@_derives(LlmCall)
def _llm_call(said: Said, entry: LlmCall) -> list[Event]:
    called = said.event(
        "LLMCallCompleted",
        agent=entry.agent,
        provider=entry.provider,
        model_id=entry.model_id,
        rule=entry.rule,
        prompt_tokens=entry.prompt_tokens,
        completion_tokens=entry.completion_tokens,
        latency_ms=entry.latency_ms,
    )
    return [called]


@_derives(ToolCalled)
def _tool_called(said: Said, entry: ToolCalled) -> list[Event]:
    """Not one of the seed's events: the audit of an agent's tool call, named as the entry."""
    fields = {k: v for k, v in to_json(entry).items() if k not in ("seq", "at", "by", "step", "type")}
    return [said.event("ToolCalled", **{k: v for k, v in fields.items() if v is not None})]


@_derives(CommandStarted)
def _command_started(said: Said, entry: CommandStarted) -> list[Event]:
    """Not one of the seed's events: a command that ran shows in the audit even when its
    runner was killed before its `ToolCalled`."""
    fields = {k: v for k, v in to_json(entry).items() if k not in ("seq", "at", "by", "step", "type")}
    return [said.event("CommandStarted", **{k: v for k, v in fields.items() if v is not None})]


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
