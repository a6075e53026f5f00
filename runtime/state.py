"""The state of a process and the functions that change it.

One journal entry is folded in two moves: `settle(plan, state, entry)` gives the
entry's own step after it (its node `end` or `done` once complete) and `leave(plan,
settled, at)` moves on to the next step from there. The engine uses them to take a step
and the store to replay the journal (both keep the settled state: the events and the
todos of a completed step are made from it), so a resumed process is exactly the
process that stopped. The node moves come from the step's checklist
machine (`compiler.machine.checklist`): intake -> cursor -> work -> cursor ...,
revise only by the teleport; the cursor's automatic moves are taken here with the
same guards (`has_task`, `past_end`) the machine names. Progress and timestamps are
display-only: no rule below reads them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

from todoflow.compiler.machine import checklist
from todoflow.dsl.nodes import node, replace

from .entries import Confirm, Entry, Revise, SubmitTasks, Teleport
from .plan import RunPlan, RunStep, Task

PENDING = "Pending"
FINISHED = "finished"  # the workflow's end; a step's own final node is `end` or `done`
STEP_DONE = ("end", "done")


@node
class Progress:
    """The run card's values: display only."""

    checklist: str | None = None  # the last confirmed checklist summary
    work: str | None = None  # the last confirmed work summary
    results: tuple[str, ...] = ()  # per position: the confirmed outcome, or Pending


@node
class ProcessState:
    seq: int  # journal entries applied
    step_id: str | None  # None once the workflow is complete
    node: str  # intake, work, revise; end or done once the step is complete; finished
    tasks: tuple[Task, ...]  # the current step's checklist
    position: int  # the cursor, 1-based; everything before it is done
    progress: Progress
    completed_steps: tuple[str, ...]
    agent_replies: int  # replies given by the agent (a scripted agent resumes by it)
    times: tuple[tuple[str, str], ...] = ()  # per position: (created_at, updated_at), display only
    step_replies: int = 0  # replies given in the current step

    @property
    def finished(self) -> bool:
        return self.node == FINISHED

    @property
    def step_complete(self) -> bool:
        return self.node in STEP_DONE

    @property
    def total(self) -> int:
        return len(self.tasks)

    @property
    def task(self) -> Task | None:
        return self.tasks[self.position - 1] if self.node == "work" and self.position <= self.total else None


@lru_cache(maxsize=256)  # a step checks the current attempt and hands out the next one
def attempt_id(process_id: str, seq: int) -> str:
    """The attempt id of the directive given after `seq` entries: new for every state."""
    digest = hashlib.sha256(f"{process_id}:{seq}".encode()).hexdigest()[:12]
    return f"{seq + 1}-{digest}"


def initial_state(plan: RunPlan, at: str) -> ProcessState:
    return _enter(plan, plan.steps[0].id, ProcessState(0, None, FINISHED, (), 1, Progress(), (), 0), at)


@cache
def _moves(kind: str) -> tuple[dict[tuple[str, str], str], dict[str, tuple[tuple[str, str], ...]]]:
    """(role, event) -> role, and role -> automatic (guard, role) moves, from the machine."""
    states, transitions = checklist(kind, "step", "step")  # type: ignore[arg-type]
    role = {s.id: s.role for s in states}
    moves: dict[tuple[str, str], str] = {}
    automatic: dict[str, list[tuple[str, str]]] = {}
    for t in transitions:
        if t.event is None:
            automatic.setdefault(role[t.source], []).append((t.cond or "", role[t.target]))
        else:
            moves[(role[t.source], t.event)] = role[t.target]
    return moves, {k: tuple(v) for k, v in automatic.items()}


@cache  # a handful of (kind, node, event, guard) combinations, asked at every step
def move(kind: str, current: str, event: str, has_task: bool) -> str | None:
    """The node after `event` (through the cursor's automatic moves), or None if not allowed."""
    moves, automatic = _moves(kind)
    target = moves.get((current, event))
    while target in automatic:
        guards = {"has_task": has_task, "past_end": not has_task}
        target = next(to for cond, to in automatic[target] if guards[cond])
    return target


def leave(plan: RunPlan, state: ProcessState, at: str) -> ProcessState:
    """Once a step is complete, the start of the step that follows (or the finish)."""
    if not state.step_complete:
        return state
    assert state.step_id is not None
    done = replace(state, completed_steps=(*state.completed_steps, state.step_id))
    return _enter(plan, plan.step(state.step_id).next_step_id, done, at)


def settle(plan: RunPlan, state: ProcessState, entry: Entry) -> ProcessState:
    """The entry's own step after the entry: its node is `end`/`done` if the step is complete."""
    assert state.step_id is not None, "a finished process takes no entries"
    step = plan.step(state.step_id)
    at = entry.at
    replies = state.agent_replies + (entry.by == "agent")
    progress = state.progress
    match entry:
        case SubmitTasks():  # the step's ready checklist, passed on unchanged, or the agent's
            tasks = step.ready_tasks if entry.tasks is None else entry.tasks
            assert tasks is not None, f"step `{step.id}` has no ready checklist to pass on"
            progress = Progress(entry.progress_checklist_outcome, progress.work, (PENDING,) * len(tasks))
            times = ((at, at),) * len(tasks)
            return _after(step, state, "submit_tasks", tasks, 1, progress, times, replies)
        case Confirm():
            index = state.position - 1
            outcome = entry.progress_execution_outcome
            results = (*progress.results[:index], outcome, *progress.results[index + 1 :])
            times = (*state.times[:index], (state.times[index][0], at), *state.times[index + 1 :])
            progress = Progress(progress.checklist, outcome, results)
            return _after(step, state, "confirm", state.tasks, state.position + 1, progress, times, replies)
        case Teleport():
            target = move(step.kind, state.node, "teleport_revise_tasks", has_task=True)
            assert target == "revise", f"teleport is not allowed at {state.node}"
            return replace(
                state,
                seq=state.seq + 1,
                node=target,
                agent_replies=replies,
                step_replies=state.step_replies + 1,
            )
        case Revise():
            kept = _unchanged_prefix(state, entry.tasks, entry.resume_from_task)
            results = (*progress.results[:kept], *(PENDING,) * (len(entry.tasks) - kept))
            times = (*state.times[:kept], *((at, at),) * (len(entry.tasks) - kept))
            progress = Progress(entry.progress_checklist_outcome, entry.progress_execution_outcome, results)
            return _after(
                step, state, "submit_revision", entry.tasks, entry.resume_from_task, progress, times, replies
            )


def _unchanged_prefix(state: ProcessState, tasks: tuple[Task, ...], resume: int) -> int:
    """How many leading tasks were done before and stay done, unchanged."""
    limit = min(state.position - 1, resume - 1, len(tasks))
    kept = 0
    while kept < limit and tasks[kept] == state.tasks[kept]:
        kept += 1
    return kept


def _after(
    step: RunStep,
    state: ProcessState,
    event: str,
    tasks: tuple[Task, ...],
    position: int,
    progress: Progress,
    times: tuple[tuple[str, str], ...],
    replies: int,
) -> ProcessState:
    target = move(step.kind, state.node, event, position <= len(tasks))
    assert target is not None, f"{event} is not allowed at {state.node}"
    return ProcessState(
        state.seq + 1,
        step.id,
        target,
        tasks,
        position,
        progress,
        state.completed_steps,
        replies,
        times,
        state.step_replies + 1,
    )


def _enter(plan: RunPlan, step_id: str, state: ProcessState, at: str) -> ProcessState:
    """The state at the start of step `step_id` (or the end of the workflow)."""
    if step_id == "end":
        return replace(state, step_id=None, node=FINISHED, tasks=(), position=1, times=(), step_replies=0)
    step = plan.step(step_id)
    if step.kind == "regular":
        task = Task(
            step.description or step.title, step.success_criteria or "The step's work is done and checked."
        )
        fresh = Progress(None, None, (PENDING,))
        return replace(
            state,
            step_id=step_id,
            node="work",
            tasks=(task,),
            position=1,
            progress=fresh,
            times=((at, at),),
            step_replies=0,
        )
    return replace(
        state,
        step_id=step_id,
        node="intake",
        tasks=(),
        position=1,
        progress=Progress(),
        times=(),
        step_replies=0,
    )


def to_json(state: ProcessState) -> dict[str, Any]:
    """The state as JSON data (for snapshots)."""
    return {
        "seq": state.seq,
        "step_id": state.step_id,
        "node": state.node,
        "tasks": [task.as_dict() for task in state.tasks],
        "position": state.position,
        "progress": {
            "checklist": state.progress.checklist,
            "work": state.progress.work,
            "results": list(state.progress.results),
        },
        "completed_steps": list(state.completed_steps),
        "agent_replies": state.agent_replies,
        "times": [list(pair) for pair in state.times],
        "step_replies": state.step_replies,
    }


def from_json(data: Mapping[str, Any]) -> ProcessState:
    progress = data["progress"]
    return ProcessState(
        data["seq"],
        data["step_id"],
        data["node"],
        tuple(map(Task.from_dict, data["tasks"])),
        data["position"],
        Progress(progress["checklist"], progress["work"], tuple(progress["results"])),
        tuple(data["completed_steps"]),
        data["agent_replies"],
        tuple((a, b) for a, b in data["times"]),
        data["step_replies"],
    )
