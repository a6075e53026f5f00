"""The state of a process and the functions that change it.

One journal entry is folded in two moves: `settle(plan, state, entry)` gives the
entry's own step after it (its node `end` or `done` once complete) and `leave(plan,
settled, at)` moves on to the next step from there. Both change a `Draft` of the state
(one handler per entry kind writes into it) and freeze it: one copy of the state per
entry, and a confirmation writes one item of its lists. The engine uses them to take a
step; `replay(plan, state, entries)` is the one fold over a journal (the stores, the log
and every other reader call it), keeping the settled state of each entry (the events and
the todos of a completed step are made from it), and `replayed` the same fold for a
reader that wants only where the journal ends (opening a run): one draft for every
entry, changed in place and frozen once. So a resumed process is exactly the process
that stopped. The node moves come from the step's checklist
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any, NamedTuple

from todoflow.compiler.machine import checklist
from todoflow.dsl.nodes import node, replace

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
    """The one fold over journal entries, each entry folded into the state it follows and
    given with the states around it (what its events, its learning and the log are made of)."""
    for entry in entries:
        settled = settle(plan, state, entry)
        yield Applied(state, settled, entry)
        state = leave(plan, settled, entry.at)


def replayed(
    plan: RunPlan, state: ProcessState, entries: Iterable[Entry]
) -> tuple[ProcessState, Applied | None]:
    """The state after the entries, and the last entry with the states around it (None: no
    entries). The same fold as `replay`, for a reader that wants only where it ends (opening
    a run): the entries before the last are folded into one draft of the state, in place,
    not copied per entry."""
    draft: Draft | None = None
    held: Entry | None = None  # the entry read last: folded once the next one is read
    for entry in entries:
        if held is not None:
            draft = draft or Draft(state)
            draft.fold(plan, held)
        held = entry
    if held is None:
        return state, None
    before = state if draft is None else draft.frozen()
    settled = settle(plan, before, held)
    applied = Applied(before, settled, held)
    return applied.after(plan), applied


@lru_cache(maxsize=256)  # a step checks the current attempt and hands out the next one
def attempt_id(process_id: str, seq: int) -> str:
    """The attempt id of the directive given after `seq` entries: new for every state."""
    digest = hashlib.sha256(f"{process_id}:{seq}".encode()).hexdigest()[:12]
    return f"{seq + 1}-{digest}"


def initial_state(plan: RunPlan, at: str) -> ProcessState:
    draft = Draft(ProcessState(0, None, FINISHED, (), 1, Progress(), (), 0))
    draft.enter(plan, plan.steps[0].id, at)
    return draft.frozen()


def turns_allowed(step: RunStep, state: ProcessState) -> int | None:
    """The step's bound on orchestrator turns: raised by the caller, or as configured."""
    return state.turns_allowed if state.turns_allowed is not None else step.configs.execution_max_turns


def actor(entry: Entry, state: ProcessState | Draft) -> str:
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
    draft = Draft(state)
    draft.leave(plan, at)
    return draft.frozen()


def settle(plan: RunPlan, state: ProcessState, entry: Entry) -> ProcessState:
    """The entry's own step after the entry: its node is `end`/`done` if the step is complete."""
    draft = Draft(state)
    draft.settle(plan, entry)
    return draft.frozen()


class Draft:
    """A process state being changed: the fold's accumulator. `settle` makes one per entry
    from the state before it and freezes it into the state after it; `replayed` folds a
    whole journal into one, in place, and freezes it once. A sequence field is the frozen
    state's tuple until a handler changes it (`own`): then a list of the draft's own, so a
    confirmation writes one item, whatever the length of the checklist."""

    __slots__ = (
        "agent_replies",
        "checklist",
        "completed_steps",
        "delegation",
        "fast_path",
        "marks",
        "node",
        "position",
        "results",
        "returned",
        "seq",
        "step_id",
        "tasks",
        "times",
        "tokens",
        "turns",
        "turns_allowed",
        "work",
    )

    def __init__(self, state: ProcessState) -> None:
        self.seq, self.step_id, self.node = state.seq, state.step_id, state.node
        self.tasks: tuple[Task, ...] | list[Task] = state.tasks
        self.position = state.position
        progress = state.progress
        self.checklist, self.work = progress.checklist, progress.work
        self.results: tuple[str, ...] | list[str] = progress.results
        self.completed_steps: tuple[str, ...] | list[str] = state.completed_steps
        self.agent_replies = state.agent_replies
        self.times: tuple[tuple[str, str], ...] | list[tuple[str, str]] = state.times
        self.turns, self.turns_allowed = state.turns, state.turns_allowed
        self.delegation, self.returned = state.delegation, state.returned
        self.marks: tuple[Mark, ...] | list[Mark] = state.marks
        self.tokens, self.fast_path = state.tokens, state.fast_path

    def frozen(self) -> ProcessState:
        return ProcessState(
            self.seq,
            self.step_id,
            self.node,
            _tuple(self.tasks),
            self.position,
            Progress(self.checklist, self.work, _tuple(self.results)),
            _tuple(self.completed_steps),
            self.agent_replies,
            _tuple(self.times),
            self.turns,
            self.turns_allowed,
            self.delegation,
            self.returned,
            _tuple(self.marks),
            self.tokens,
            self.fast_path,
        )

    def fold(self, plan: RunPlan, entry: Entry) -> None:
        """The entry folded in: settled, then on to the next step if it completed its own."""
        self.settle(plan, entry)
        if self.node in STEP_DONE:
            self.leave(plan, entry.at)

    def settle(self, plan: RunPlan, entry: Entry) -> None:
        assert self.step_id is not None, "a finished process takes no entries"
        turn = _is_turn(entry, self)
        self.seq += 1
        self.agent_replies += entry.by == "agent"
        self.turns += turn
        _SETTLE[type(entry)](plan, plan.step(self.step_id), self, entry)

    def leave(self, plan: RunPlan, at: str) -> None:
        """Once the step is complete: the start of the step that follows (or the finish)."""
        if self.node not in STEP_DONE:
            return
        assert self.step_id is not None
        self.completed_steps = (*self.completed_steps, self.step_id)
        self.enter(plan, plan.step(self.step_id).next_step_id, at)

    def enter(self, plan: RunPlan, step_id: str, at: str) -> None:
        """The start of step `step_id` (or the end of the workflow)."""
        self.turns, self.turns_allowed, self.delegation, self.returned = 0, None, None, None
        self.marks, self.fast_path, self.position = (), None, 1
        if step_id == "end":
            self.step_id, self.node, self.tasks, self.times = None, FINISHED, (), ()
            return
        step = plan.step(step_id)
        self.step_id = step_id
        if step.kind == "regular":
            criteria = step.success_criteria or "The step's work is done and checked."
            self.node, self.tasks = "work", (Task(step.description or step.title, criteria),)
            self.checklist, self.work, self.results, self.times = None, None, (PENDING,), ((at, at),)
            return
        self.node, self.tasks, self.times = "intake", (), ()
        self.checklist, self.work, self.results = None, None, ()

    def own_results(self) -> list[str]:
        if type(self.results) is not list:
            self.results = list(self.results)
        return self.results

    def own_times(self) -> list[tuple[str, str]]:
        if type(self.times) is not list:
            self.times = list(self.times)
        return self.times

    def own_marks(self) -> list[Mark]:
        if type(self.marks) is not list:
            self.marks = list(self.marks)
        return self.marks

    def own_tasks(self) -> list[Task]:
        if type(self.tasks) is not list:
            self.tasks = list(self.tasks)
        return self.tasks

    def mark(self, position: int, **changes: Any) -> None:
        """Todo `position`'s mark with some fields changed."""
        marks = self.own_marks()
        marks += [NO_MARK] * (position - len(marks))
        marks[position - 1] = replace(marks[position - 1], **changes)

    def touch(self, position: int, at: str) -> None:
        times = self.own_times()
        times[position - 1] = (times[position - 1][0], at)

    def moved(self, step: RunStep, event: str, position: int) -> None:
        """To the node the step's machine moves to on `event`, the cursor at `position`."""
        target = move(step.kind, self.node, event, position <= len(self.tasks))
        assert target is not None, f"{event} is not allowed at {self.node}"
        self.node, self.position = target, position


def _tuple(items: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    return tuple(items) if type(items) is list else items  # type: ignore[return-value]


Settle = Callable[[RunPlan, RunStep, Draft, Any], None]
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
def _submit_tasks(plan: RunPlan, step: RunStep, draft: Draft, entry: SubmitTasks) -> None:
    """The step's ready checklist, passed on unchanged, or the agent's."""
    tasks = step.ready_tasks if entry.tasks is None else entry.tasks
    assert tasks is not None, f"step `{step.id}` has no ready checklist to pass on"
    draft.tasks, draft.checklist, draft.results = (
        tasks,
        entry.progress_checklist_outcome,
        (PENDING,) * len(tasks),
    )
    draft.times, draft.marks = ((entry.at, entry.at),) * len(tasks), ()
    draft.moved(step, "submit_tasks", 1)


@_settles(Confirm)
def _confirm(plan: RunPlan, step: RunStep, draft: Draft, entry: Confirm) -> None:
    _confirmed(draft, entry.progress_execution_outcome, entry.at)
    draft.moved(step, "confirm", draft.position + 1)


@_settles(Teleport)
def _teleport(plan: RunPlan, step: RunStep, draft: Draft, entry: Teleport) -> None:
    draft.moved(step, "teleport_revise_tasks", draft.position)


@_settles(Revise)
def _revise(plan: RunPlan, step: RunStep, draft: Draft, entry: Revise) -> None:
    kept = _kept(draft.position, draft.tasks, entry.tasks, entry.resume_from_task)
    fresh = len(entry.tasks) - kept
    draft.results = (*draft.results[:kept], *(PENDING,) * fresh)
    draft.checklist, draft.work = entry.progress_checklist_outcome, entry.progress_execution_outcome
    draft.times = (*draft.times[:kept], *_revised_times(draft, entry, kept))
    draft.marks, draft.tasks = tuple(draft.marks[:kept]), entry.tasks
    draft.moved(step, "submit_revision", entry.resume_from_task)


def _revised_times(draft: Draft, entry: Revise, kept: int) -> list[tuple[str, str]]:
    """Past the kept prefix, a task the revision left as it was at its position keeps when
    it was created; every other task is created by the revision."""
    return [
        (draft.times[i][0] if i < len(draft.times) and _same(draft.tasks[i], task) else entry.at, entry.at)
        for i, task in enumerate(entry.tasks[kept:], start=kept)
    ]


def _same(old: Task, new: Task) -> bool:
    return (old.action, old.expected_result) == (new.action, new.expected_result)


@_settles(Delegate)
def _delegate(plan: RunPlan, step: RunStep, draft: Draft, entry: Delegate) -> None:
    draft.delegation = Delegation(
        position=entry.position,
        agent=entry.agent,
        instructions=entry.instructions_to_sub_agent,
        success_criteria=entry.success_criteria_for_sub_agent,
        iteration=draft.turns,
        seq=entry.seq,
    )
    draft.mark(entry.position, assigned=entry.agent)
    draft.moved(step, "delegate", draft.position)


@_settles(SubAgentDone)
def _sub_agent_done(plan: RunPlan, step: RunStep, draft: Draft, entry: SubAgentDone) -> None:
    """A sub-agent's answer: prevalidated, it confirms the todo; else the todo goes back."""
    draft.returned = Returned(entry.position, entry.agent, entry.passed, entry.reason, entry.seq)
    draft.delegation = None
    if not entry.passed:
        draft.moved(step, "return_delegation", draft.position)
        return
    _confirmed(draft, entry.progress_execution_outcome, entry.at)
    draft.moved(step, "accept_delegation", draft.position + 1)


@_settles(SubAgentFailed)
def _sub_agent_failed(plan: RunPlan, step: RunStep, draft: Draft, entry: SubAgentFailed) -> None:
    draft.returned = Returned(entry.position, entry.agent, False, entry.failed, entry.seq)
    draft.delegation = None
    draft.moved(step, "return_delegation", draft.position)


@_settles(CreateTodo)
def _create_todo(plan: RunPlan, step: RunStep, draft: Draft, entry: CreateTodo) -> None:
    draft.own_tasks().append(Task(entry.title, entry.description, (), entry.priority))
    draft.own_results().append(PENDING)
    draft.own_times().append((entry.at, entry.at))


@_settles(UpdateTodo)
def _update_todo(plan: RunPlan, step: RunStep, draft: Draft, entry: UpdateTodo) -> None:
    marked: dict[str, Any] = {}
    if entry.status is not None:
        marked["status"] = entry.status
    if entry.notes is not None:
        marked["notes"] = entry.notes
    draft.mark(entry.position, **marked)
    draft.touch(entry.position, entry.at)


@_settles(Continue)
def _continue(plan: RunPlan, step: RunStep, draft: Draft, entry: Continue) -> None:
    """A turn of the orchestrator's own: counted, nothing else changes."""


@_settles(RaiseTurns)
def _raise_turns(plan: RunPlan, step: RunStep, draft: Draft, entry: RaiseTurns) -> None:
    draft.turns_allowed = entry.execution_max_turns


@_settles(LlmCall)
def _llm_call(plan: RunPlan, step: RunStep, draft: Draft, entry: LlmCall) -> None:
    draft.tokens = (draft.tokens[0] + entry.prompt_tokens, draft.tokens[1] + entry.completion_tokens)


@_settles(ToolCalled)
def _tool_called(plan: RunPlan, step: RunStep, draft: Draft, entry: ToolCalled) -> None:
    """An audit record: nothing of the process changes."""


@_settles(CommandStarted)
def _command_started(plan: RunPlan, step: RunStep, draft: Draft, entry: CommandStarted) -> None:
    """A record of what runs beside the process: nothing of it changes."""


@_settles(FastPathStarted)
def _fast_path_started(plan: RunPlan, step: RunStep, draft: Draft, entry: FastPathStarted) -> None:
    draft.fast_path = "running"


@_settles(FastPathFailed)
def _fast_path_failed(plan: RunPlan, step: RunStep, draft: Draft, entry: FastPathFailed) -> None:
    """A fresh start: nothing of the script's attempt carries over (the turns counted before
    it neither)."""
    draft.enter(plan, step.id, entry.at)
    draft.fast_path = "failed"


def _is_turn(entry: Entry, state: ProcessState | Draft) -> bool:
    """Every accepted reply of the orchestrator at its work and revise nodes is a turn (a
    learn_code script's delegations too: it plays the orchestrator); intake, the caller's
    entries and the sub-agents' replies are not."""
    if entry.by not in ("agent", "script") or state.node not in ("work", "revise"):
        return False
    return actor(entry, state) == ORCHESTRATOR


def _confirmed(draft: Draft, outcome: str, at: str) -> None:
    """The current task done: its result and time recorded, its mark's status cleared."""
    index = draft.position - 1
    draft.own_results()[index] = outcome
    draft.work = outcome
    times = draft.own_times()
    times[index] = (times[index][0], at)
    if index < len(draft.marks):
        draft.mark(index + 1, status=None)


def unchanged_prefix(state: ProcessState, tasks: tuple[Task, ...], resume: int) -> int:
    """How many leading tasks were done before and stay done, unchanged."""
    return _kept(state.position, state.tasks, tasks, resume)


def _kept(position: int, old: Sequence[Task], tasks: tuple[Task, ...], resume: int) -> int:
    limit = min(position - 1, resume - 1, len(tasks))
    kept = 0
    while kept < limit and tasks[kept] == old[kept]:
        kept += 1
    return kept


def to_json(state: ProcessState, plan: RunPlan | None = None) -> dict[str, Any]:
    """The state as JSON data (for snapshots). With the run's `plan`, a checklist that is
    the step's ready checklist is `"ready": true` rather than a copy of the plan's tasks."""
    ready = plan is not None and state.step_id is not None and _is_ready(plan, state)
    out: dict[str, Any] = {
        "seq": state.seq,
        "step_id": state.step_id,
        "node": state.node,
        **({"ready": True} if ready else {"tasks": [task.as_dict() for task in state.tasks]}),
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


def _is_ready(plan: RunPlan, state: ProcessState) -> bool:
    """Whether the state's checklist is its step's ready checklist (the very tuple: passed
    on unchanged, and never revised since)."""
    ready = plan.step(state.step_id or "").ready_tasks
    return bool(state.tasks) and state.tasks is ready


def from_json(data: Mapping[str, Any], plan: RunPlan | None = None) -> ProcessState:
    """A state `to_json` wrote (snapshots before the orchestrator lack its fields); `plan`
    holds the ready checklist a snapshot names rather than copies."""
    progress = data["progress"]
    delegation, returned = data.get("delegation"), data.get("returned")
    if data.get("ready"):
        if plan is None or (tasks := plan.step(data["step_id"]).ready_tasks) is None:
            raise KeyError("tasks")  # a snapshot of another plan: not this run's
    else:
        tasks = tuple(map(Task.from_dict, data["tasks"]))
    return ProcessState(
        data["seq"],
        data["step_id"],
        data["node"],
        tasks,
        data["position"],
        Progress(progress["checklist"], progress["work"], tuple(progress["results"])),
        tuple(data["completed_steps"]),
        data["agent_replies"],
        tuple([(a, b) for a, b in data["times"]]),
        data.get("turns", data.get("step_replies", 0)),
        data.get("turns_allowed"),
        None if delegation is None else Delegation(**delegation),
        None if returned is None else Returned(**returned),
        tuple(Mark(**mark) for mark in data.get("marks", ())),
        tuple(data.get("tokens", (0, 0))),
        data.get("fast_path"),
    )
