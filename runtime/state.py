"""The state of a process and the functions that change it.

One journal entry is folded in two moves: `settle(plan, state, entry)` gives the
entry's own step after it (its node `end` or `done` once complete) and `leave(plan,
settled, at)` moves on to the next step from there. The engine uses them to take a step;
`replay(plan, state, entries)` is the one fold over a journal (the stores, the log and
every other reader call it), keeping the settled state of each entry (the events and the
todos of a completed step are made from it), so a resumed process is exactly the
process that stopped. The node moves come from the step's checklist
machine (`compiler.machine.checklist`): intake -> cursor -> work -> cursor ...,
revise only by the teleport; the cursor's automatic moves are taken here with the
same guards (`has_task`, `past_end`) the machine names. A todo_task step's work node is
the orchestrator's: a delegation moves it to `delegated` until the sub-agent answers;
the orchestrator's turns in the step are counted against its bound. Progress,
timestamps, notes and who a todo is assigned to are display-only: no rule below reads
them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache, lru_cache
from typing import Any, NamedTuple

from todoflow.compiler.machine import checklist
from todoflow.dsl.nodes import node, replace

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
class Mark:
    """What the orchestrator or a sub-agent said of one todo: display only."""

    status: str | None = None  # `in_progress` or `blocked` as update_todo set it; None: as the cursor says
    notes: str | None = None
    assigned: str | None = None  # the route id, or `generic`, once delegated


NO_MARK = Mark()


@node
class Delegation:
    """An open delegation: the todo at `position` is with `agent` (a route id or `generic`)."""

    position: int
    agent: str
    instructions: str
    success_criteria: str | None
    iteration: int  # the orchestrator turn that delegated it
    seq: int  # its journal entry


@node
class Returned:
    """How the last delegation of the step ended, for the orchestrator's next directive."""

    position: int
    agent: str
    passed: bool
    reason: str | None
    seq: int


@node
class ProcessState:
    seq: int  # journal entries applied
    step_id: str | None  # None once the workflow is complete
    node: str  # intake, work, delegated, revise; end or done once the step is complete; finished
    tasks: tuple[Task, ...]  # the current step's checklist
    position: int  # the cursor, 1-based; everything before it is done
    progress: Progress
    completed_steps: tuple[str, ...]
    agent_replies: int  # replies given by agents, sub-agents included (a scripted agent resumes by it)
    times: tuple[tuple[str, str], ...] = ()  # per position: (created_at, updated_at), display only
    turns: int = 0  # the orchestrator's accepted replies in the current step
    turns_allowed: int | None = None  # the step's bound as raised by the caller (None: as configured)
    delegation: Delegation | None = None
    returned: Returned | None = None
    marks: tuple[Mark, ...] = ()  # per position (shorter: the rest unmarked)
    tokens: tuple[int, int] = (0, 0)  # the run's model calls so far: prompt and completion tokens
    fast_path: str | None = None  # learn_code in this step: None (not tried), `running`, `failed`

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

    def mark(self, position: int) -> Mark:
        return self.marks[position - 1] if position <= len(self.marks) else NO_MARK

    def status(self, position: int) -> str:
        """A todo's status as todos.json says it: completed, in_progress, blocked or pending."""
        if position < self.position or self.step_complete:
            return "completed"
        marked = self.mark(position).status
        if marked is not None:
            return marked
        return (
            "in_progress" if position == self.position and self.node in ("work", "delegated") else "pending"
        )

    def with_mark(self, position: int, **changes: Any) -> tuple[Mark, ...]:
        marks = (*self.marks, *(NO_MARK,) * (position - len(self.marks)))
        return (*marks[: position - 1], replace(marks[position - 1], **changes), *marks[position:])


class Applied(NamedTuple):
    """One journal entry with the states around it: what its events are derived from."""

    before: ProcessState
    settled: ProcessState  # the entry's own step after it
    entry: Entry

    @property
    def seq(self) -> int:
        return self.entry.seq

    def after(self, plan: RunPlan) -> ProcessState:
        """The state the entry leaves the process in (the next step's start once complete)."""
        return leave(plan, self.settled, self.entry.at)


def replay(plan: RunPlan, state: ProcessState, entries: Iterable[Entry]) -> Iterator[Applied]:
    """The one fold over journal entries: each entry folded into the state it follows,
    with the states around it."""
    for entry in entries:
        settled = settle(plan, state, entry)
        yield Applied(state, settled, entry)
        state = leave(plan, settled, entry.at)


def replayed(plan: RunPlan, state: ProcessState, entries: Iterable[Entry]) -> ProcessState:
    """The state after the entries."""
    last: Applied | None = None
    for last in replay(plan, state, entries):  # noqa: B007 (the last one is what is asked)
        pass
    return state if last is None else last.after(plan)


@lru_cache(maxsize=256)  # a step checks the current attempt and hands out the next one
def attempt_id(process_id: str, seq: int) -> str:
    """The attempt id of the directive given after `seq` entries: new for every state."""
    digest = hashlib.sha256(f"{process_id}:{seq}".encode()).hexdigest()[:12]
    return f"{seq + 1}-{digest}"


def initial_state(plan: RunPlan, at: str) -> ProcessState:
    return _enter(plan, plan.steps[0].id, ProcessState(0, None, FINISHED, (), 1, Progress(), (), 0), at)


def turns_allowed(step: RunStep, state: ProcessState) -> int | None:
    """The step's bound on orchestrator turns: raised by the caller, or as configured."""
    return state.turns_allowed if state.turns_allowed is not None else step.configs.execution_max_turns


def actor(entry: Entry, state: ProcessState) -> str:
    """Who did it: the orchestrator, or the route id (`generic`) of the delegated sub-agent."""
    match entry:
        case SubAgentDone() | SubAgentFailed() | UpdateTodo():
            return entry.agent
        case _:
            return ORCHESTRATOR


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
    counted: Changes = {
        "seq": state.seq + 1,
        "agent_replies": state.agent_replies + (entry.by == "agent"),
        "turns": state.turns + _is_turn(entry, state),
    }
    return _SETTLE[type(entry)](plan, plan.step(state.step_id), state, entry, counted)


Changes = dict[str, Any]  # fields of the state an entry changes, applied in one copy
Settle = Callable[[RunPlan, RunStep, ProcessState, Any, Changes], ProcessState]
_SETTLE: dict[type[Any], Settle] = {}  # one handler per entry kind: how it changes the state


def _settles(kind: type[Any]) -> Callable[[Settle], Settle]:
    def add(handler: Settle) -> Settle:
        _SETTLE[kind] = handler
        return handler

    return add


def settled_kinds() -> frozenset[type[Any]]:
    """The entry kinds `settle` has a handler for (a test holds it equal to `entries.KINDS`)."""
    return frozenset(_SETTLE)


@_settles(SubmitTasks)
def _submit_tasks(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: SubmitTasks, counted: Changes
) -> ProcessState:
    """The step's ready checklist, passed on unchanged, or the agent's."""
    tasks = step.ready_tasks if entry.tasks is None else entry.tasks
    assert tasks is not None, f"step `{step.id}` has no ready checklist to pass on"
    progress = Progress(entry.progress_checklist_outcome, state.progress.work, (PENDING,) * len(tasks))
    fresh = {"tasks": tasks, "progress": progress, "times": ((entry.at, entry.at),) * len(tasks), "marks": ()}
    return _moved(step, state, "submit_tasks", 1, counted | fresh)


@_settles(Confirm)
def _confirm(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: Confirm, counted: Changes
) -> ProcessState:
    done = _confirmed(state, entry.progress_execution_outcome, entry.at)
    return _moved(step, state, "confirm", state.position + 1, counted | done)


@_settles(Teleport)
def _teleport(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: Teleport, counted: Changes
) -> ProcessState:
    return _moved(step, state, "teleport_revise_tasks", state.position, counted)


@_settles(Revise)
def _revise(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: Revise, counted: Changes
) -> ProcessState:
    kept = unchanged_prefix(state, entry.tasks, entry.resume_from_task)
    fresh = len(entry.tasks) - kept
    results = (*state.progress.results[:kept], *(PENDING,) * fresh)
    revised = {
        "tasks": entry.tasks,
        "progress": Progress(entry.progress_checklist_outcome, entry.progress_execution_outcome, results),
        "times": (*state.times[:kept], *((entry.at, entry.at),) * fresh),
        "marks": state.marks[:kept],
    }
    return _moved(step, state, "submit_revision", entry.resume_from_task, counted | revised)


@_settles(Delegate)
def _delegate(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: Delegate, counted: Changes
) -> ProcessState:
    delegation = Delegation(
        position=entry.position,
        agent=entry.agent,
        instructions=entry.instructions_to_sub_agent,
        success_criteria=entry.success_criteria_for_sub_agent,
        iteration=counted["turns"],
        seq=entry.seq,
    )
    marks = state.with_mark(entry.position, assigned=entry.agent)
    return _moved(
        step, state, "delegate", state.position, counted | {"delegation": delegation, "marks": marks}
    )


@_settles(SubAgentDone)
def _sub_agent_done(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: SubAgentDone, counted: Changes
) -> ProcessState:
    """A sub-agent's answer: prevalidated, it confirms the todo; else the todo goes back."""
    returned = Returned(entry.position, entry.agent, entry.passed, entry.reason, entry.seq)
    back = counted | {"delegation": None, "returned": returned}
    if not entry.passed:
        return _moved(step, state, "return_delegation", state.position, back)
    done = _confirmed(state, entry.progress_execution_outcome, entry.at)
    return _moved(step, state, "accept_delegation", state.position + 1, back | done)


@_settles(SubAgentFailed)
def _sub_agent_failed(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: SubAgentFailed, counted: Changes
) -> ProcessState:
    returned = Returned(entry.position, entry.agent, False, entry.failed, entry.seq)
    return _moved(
        step, state, "return_delegation", state.position, counted | {"delegation": None, "returned": returned}
    )


@_settles(CreateTodo)
def _create_todo(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: CreateTodo, counted: Changes
) -> ProcessState:
    task = Task(entry.title, entry.description, (), entry.priority)
    progress = replace(state.progress, results=(*state.progress.results, PENDING))
    created = {
        "tasks": (*state.tasks, task),
        "progress": progress,
        "times": (*state.times, (entry.at, entry.at)),
    }
    return replace(state, **counted, **created)


@_settles(UpdateTodo)
def _update_todo(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: UpdateTodo, counted: Changes
) -> ProcessState:
    marked: Changes = {}
    if entry.status is not None:
        marked["status"] = entry.status
    if entry.notes is not None:
        marked["notes"] = entry.notes
    marks = state.with_mark(entry.position, **marked)
    return replace(state, **counted, marks=marks, times=_touched(state, entry.position, entry.at))


@_settles(Continue)
def _continue(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: Continue, counted: Changes
) -> ProcessState:
    return replace(state, **counted)


@_settles(RaiseTurns)
def _raise_turns(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: RaiseTurns, counted: Changes
) -> ProcessState:
    return replace(state, **counted, turns_allowed=entry.execution_max_turns)


@_settles(LlmCall)
def _llm_call(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: LlmCall, counted: Changes
) -> ProcessState:
    spent = (state.tokens[0] + entry.prompt_tokens, state.tokens[1] + entry.completion_tokens)
    return replace(state, **counted, tokens=spent)


@_settles(FastPathStarted)
def _fast_path_started(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: FastPathStarted, counted: Changes
) -> ProcessState:
    return replace(state, **counted, fast_path="running")


@_settles(FastPathFailed)
def _fast_path_failed(
    plan: RunPlan, step: RunStep, state: ProcessState, entry: FastPathFailed, counted: Changes
) -> ProcessState:
    """A fresh start: nothing of the script's attempt carries over."""
    fresh = _enter(plan, step.id, state, entry.at)
    return replace(fresh, fast_path="failed", seq=counted["seq"], agent_replies=counted["agent_replies"])


def _is_turn(entry: Entry, state: ProcessState) -> bool:
    """Every accepted reply of the orchestrator at its work and revise nodes is a turn (a
    learn_code script's delegations too: it plays the orchestrator); intake, the caller's
    entries and the sub-agents' replies are not."""
    if entry.by not in ("agent", "script") or state.node not in ("work", "revise"):
        return False
    return actor(entry, state) == ORCHESTRATOR


def _confirmed(state: ProcessState, outcome: str, at: str) -> Changes:
    """The current task done: its result and time recorded, its mark's status cleared."""
    index = state.position - 1
    results = (*state.progress.results[:index], outcome, *state.progress.results[index + 1 :])
    marks = (
        state.with_mark(state.position, status=None) if state.position <= len(state.marks) else state.marks
    )
    return {
        "progress": Progress(state.progress.checklist, outcome, results),
        "times": _touched(state, state.position, at),
        "marks": marks,
    }


def _touched(state: ProcessState, position: int, at: str) -> tuple[tuple[str, str], ...]:
    index = position - 1
    return (*state.times[:index], (state.times[index][0], at), *state.times[index + 1 :])


def unchanged_prefix(state: ProcessState, tasks: tuple[Task, ...], resume: int) -> int:
    """How many leading tasks were done before and stay done, unchanged."""
    limit = min(state.position - 1, resume - 1, len(tasks))
    kept = 0
    while kept < limit and tasks[kept] == state.tasks[kept]:
        kept += 1
    return kept


def _moved(step: RunStep, state: ProcessState, event: str, position: int, changes: Changes) -> ProcessState:
    """`state` with the entry's changes, at the node the step's machine moves to on `event`
    (one copy of the state per entry)."""
    tasks = changes.get("tasks", state.tasks)
    target = move(step.kind, state.node, event, position <= len(tasks))
    assert target is not None, f"{event} is not allowed at {state.node}"
    return replace(state, **changes, node=target, position=position)


def _enter(plan: RunPlan, step_id: str, state: ProcessState, at: str) -> ProcessState:
    """The state at the start of step `step_id` (or the end of the workflow)."""
    fresh = {
        "turns": 0,
        "turns_allowed": None,
        "delegation": None,
        "returned": None,
        "marks": (),
        "fast_path": None,
    }
    if step_id == "end":
        return replace(state, step_id=None, node=FINISHED, tasks=(), position=1, times=(), **fresh)
    step = plan.step(step_id)
    if step.kind == "regular":
        task = Task(
            step.description or step.title, step.success_criteria or "The step's work is done and checked."
        )
        return replace(
            state,
            step_id=step_id,
            node="work",
            tasks=(task,),
            position=1,
            progress=Progress(None, None, (PENDING,)),
            times=((at, at),),
            **fresh,
        )
    return replace(
        state, step_id=step_id, node="intake", tasks=(), position=1, progress=Progress(), times=(), **fresh
    )


def to_json(state: ProcessState) -> dict[str, Any]:
    """The state as JSON data (for snapshots)."""
    out: dict[str, Any] = {
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
        "turns": state.turns,
        "turns_allowed": state.turns_allowed,
        "delegation": _fields(state.delegation),
        "returned": _fields(state.returned),
        "marks": [_fields(mark) for mark in state.marks],
        "tokens": list(state.tokens),
        "fast_path": state.fast_path,
    }
    return out


def _fields(value: Any) -> dict[str, Any] | None:
    return None if value is None else {name: getattr(value, name) for name in type(value)._node_fields}


def from_json(data: Mapping[str, Any]) -> ProcessState:
    """A state `to_json` wrote (snapshots before the orchestrator lack its fields)."""
    progress = data["progress"]
    delegation, returned = data.get("delegation"), data.get("returned")
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
        data.get("turns", data.get("step_replies", 0)),
        data.get("turns_allowed"),
        None if delegation is None else Delegation(**delegation),
        None if returned is None else Returned(**returned),
        tuple(Mark(**mark) for mark in data.get("marks", ())),
        tuple(data.get("tokens", (0, 0))),
        data.get("fast_path"),
    )
