"""The passive engine: `directive()` says what the current node asks, `step()` applies one
reply. It never calls an agent; drivers call it, one reply at a time.

A step, under the process's lock: the attempt id must be the current one; the reply
must be valid for the node (`runtime.replies`, and the orchestrator's rules in
`runtime.orchestrator`); a ready checklist must be passed on unchanged; a step that
would complete must find its expected files in the workspace. Only then is the entry
written (one fsync) and the state advanced. A refused reply changes nothing and comes
back with the reason and the current directive. A reply sent again with its attempt id
after it was applied (its answer lost on the way) raises `Replayed` with the current
directive, where the store records which reply used an attempt (the database does; a
run folder refuses it as stale). A store shared by many programs may find at commit
that another one stepped first (`Moved`): the step is then taken again from the
state that one left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import replace

from . import orchestrator
from .directive import Directive
from .entries import (
    Confirm,
    Entry,
    Head,
    LlmCall,
    RaiseTurns,
    Revise,
    SubmitTasks,
    Teleport,
    ToolCalled,
    redacted,
)
from .events import todos
from .llm_choice import LlmChoices, Spent, ToolUse, Usage
from .plan import Task
from .replies import (
    CompleteReply,
    CompleteTodoReply,
    ContinueReply,
    CreateTodoReply,
    DelegateReply,
    IntakeReply,
    InvalidReply,
    Reply,
    RevisionReply,
    SubAgentFailedReply,
    TaskItem,
    TeleportReply,
    UpdateTodoReply,
    WorkReply,
    parse_reply,
)
from .state import Applied, ProcessState, attempt_id, leave, settle
from .store.base import Derived, LearningStore, Moved, Request, Store, StoreError
from .workspace import Files, Folder

Clock = Callable[[], str]
T = TypeVar("T")
MAX_MOVES = 1000  # steps another program may commit first before one step gives up


_SECOND: list[tuple[int, str]] = [(-1, "")]  # the last second formatted: steps come many to a second


def utc_now() -> str:
    """The time in UTC to the millisecond, `2026-01-31T12:00:00.000Z`."""
    seconds, fraction = divmod(time.time_ns() // 1_000_000, 1000)
    second, text = _SECOND[0]
    if second != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _SECOND[0] = (seconds, text)
    return f"{text}.{fraction:03d}Z"


class Refusal(TodoflowError):
    """A reply the engine did not apply: why, and the directive that still stands."""

    def __init__(self, reason: str, directive: Directive) -> None:
        super().__init__(reason)
        self.reason, self.directive = reason, directive


class Replayed(TodoflowError):
    """Not a refusal: this very reply, with this attempt id, was applied before (a retry
    whose first answer was lost). `directive` is the one that stands now."""

    def __init__(self, attempt: str, directive: Directive) -> None:
        super().__init__(f"attempt `{attempt}` was applied already; this is the current directive")
        self.attempt, self.directive = attempt, directive


def _retried(work: Callable[[bool], T], cached: bool = False) -> T:
    """`work(cached)`, again from the current state each time another program committed
    first (`cached`: the first try may start from the state the store knows)."""
    for _ in range(MAX_MOVES):
        try:
            return work(cached)
        except Moved:
            cached = False
    raise StoreError(f"{MAX_MOVES} other steps were committed first, one after another; try again")


class Engine:
    def __init__(
        self,
        store: Store,
        workspace: Path,
        workflow: Mapping[str, str],
        clock: Clock = utc_now,
        llms: LlmChoices | None = None,
        learnings: LearningStore | None = None,
        fast_path_only: bool = False,
        scripts: Path | None = None,
        files: Files | None = None,
    ) -> None:
        self.store, self.plan, self.workspace = store, store.plan, workspace
        self.files = files or Folder(workspace)  # what the rules ask of the workspace (a replay: the journal)
        self.fast_path_only = fast_path_only  # learn_code steps: the script, never an orchestrator
        self.workflow = dict(workflow)
        self.clock = clock
        self.llms, self.learnings = llms or LlmChoices(), learnings
        self.scripts = scripts  # the learnings folder: learn_code's `<step-id>/main.py` is read there

    @property
    def process_id(self) -> str:
        return self.store.process_id

    def close(self) -> None:
        """Release the store's files (a run folder's derived files are brought up to date)."""
        self.store.close()

    def repair(self, quick: bool = False) -> bool:
        """Bring the derived files (events, todos, learnings) up to the journal, if a crash
        or a full disk left them behind; writes nothing when they are current, and what
        cannot be written is logged. A store also does this before its first step; a
        driver asks when it opens a run (`process.resume_process`: `quick`, only what the
        ends of the files show), since a complete run gets no next step."""
        return self.store.repair(quick) if isinstance(self.store, Derived) else False

    def gaps(self) -> list[str]:
        """What the store's derived files (events, todos, learnings) lack against the
        journal, one line each: none when they match, or when the store keeps none. Reads
        only; a writer's next step (or `repair`) rebuilds them."""
        return self.store.gaps() if isinstance(self.store, Derived) else []

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def directive(self) -> Directive:
        with self.store.locked() as state:
            return self._directive(state)

    def todos(self) -> str:
        """`list_todos`: the current step's checklist in the todos.json format."""
        with self.store.locked() as state:
            step = self.plan.step(state.step_id) if state.step_id else None
            if step is None or step.kind != "todo_task" or not state.tasks:
                raise InvalidReply(
                    "there is no checklist to list: the current node is not a todo_task step's work"
                )
            return todos(step, state)

    def step(
        self, attempt: str, data: Mapping[str, Any], by: str = "agent", usage: Sequence[Spent] = ()
    ) -> Directive:
        """Apply one reply (or todo tool call); returns the next directive, or raises `Refusal`.

        `usage` holds the model calls that produced the reply: they are journaled before
        it, in the same write, and on their own if the reply is refused (what was spent
        was spent), so a refusal after model calls hands out a new attempt id."""
        request = Request(attempt, data, by)
        return _retried(lambda cached: self._step(request, data, by, usage, cached), self.store.shared)

    def _step(
        self, request: Request, data: Mapping[str, Any], by: str, usage: Sequence[Spent], cached: bool
    ) -> Directive:
        """One try. On a state the store knew (`cached`), a reply that would not be applied
        is refused only if that state is still current; else it is looked at again on the
        current one (`Moved`)."""
        attempt = request.attempt
        with self.store.locked(cached) as state:
            current = attempt_id(self.process_id, state.seq)
            if cached and (attempt != current or state.finished) and self.store.behind(state):
                raise Moved("the state this store knew is behind")
            if attempt != current and self.store.replayed(request):
                raise Replayed(attempt, self._directive(state))
            if state.finished:
                raise Refusal("the run is complete; there is nothing to reply to", self._directive(state))
            if attempt != current:
                reason = f"attempt `{attempt}` is stale or used; the current attempt is `{current}`"
                raise Refusal(reason, self._directive(state))
            spent, before = self._calls(state, usage)
            try:
                step = self.plan.step(before.step_id or "")
                reply = parse_reply(before.node, data, orchestrated=step.kind == "todo_task")
                applied = self._applied(before, self._entry(before, reply, by))
                if applied.settled.step_complete:
                    self._check_outputs(applied.settled)
            except InvalidReply as invalid:
                if cached and self.store.behind(state):
                    raise Moved("the state this store knew is behind") from None
                if spent:
                    self.store.commit(spent, before)
                raise Refusal(invalid.reason, self._directive(before)) from None
            after = leave(self.plan, applied.settled, applied.entry.at)
            self.store.commit([*spent, applied], after, request)
            return self._directive(after)

    def _calls(self, state: ProcessState, usage: Sequence[Spent]) -> tuple[list[Applied], ProcessState]:
        """The model and tool calls as journal entries, folded into the state."""
        applied = []
        for call in usage:
            head = Head(seq=state.seq + 1, at=self.clock(), by="driver", step=state.step_id or "")
            entry = _tool_called(head, call) if isinstance(call, ToolUse) else _llm_call(head, call)
            applied.append(self._applied(state, entry))
            state = applied[-1].settled
        return applied, state

    def journal(self, attempt: str, make: Callable[[int, str], Entry]) -> Directive:
        """Journal a driver's own entry (`make(seq, at)`: the fast path's start or failure)
        against the current attempt."""
        return _retried(lambda _: self._journal(attempt, make))

    def _journal(self, attempt: str, make: Callable[[int, str], Entry]) -> Directive:
        with self.store.locked() as state:
            if attempt != attempt_id(self.process_id, state.seq) or state.finished:
                raise Refusal(
                    "the entry belongs to a directive that no longer stands", self._directive(state)
                )
            entry = make(state.seq + 1, self.clock())
            return self._commit(self._applied(state, entry))

    def record_usage(self, attempt: str, usage: Sequence[Spent]) -> Directive:
        """Journal model calls that led to no reply (an agent that stopped)."""
        return _retried(lambda _: self._record_usage(attempt, usage))

    def _record_usage(self, attempt: str, usage: Sequence[Spent]) -> Directive:
        with self.store.locked() as state:
            if attempt != attempt_id(self.process_id, state.seq) or state.finished:
                raise Refusal(
                    "the model calls belong to a directive that no longer stands", self._directive(state)
                )
            spent, after = self._calls(state, usage)
            self.store.commit(spent, after)
            return self._directive(after)

    def raise_turns(self, attempt: str, execution_max_turns: int) -> Directive:
        """Raise the current step's bound on orchestrator turns (the caller's decision,
        journaled), so a run stopped at its bound can go on."""
        return _retried(lambda _: self._raise_turns(attempt, execution_max_turns))

    def _raise_turns(self, attempt: str, execution_max_turns: int) -> Directive:
        with self.store.locked() as state:
            current = attempt_id(self.process_id, state.seq)
            step = self.plan.step(state.step_id) if state.step_id else None
            if attempt != current or step is None or step.kind != "todo_task":
                raise Refusal(
                    "the bound on orchestrator turns applies to a todo_task step", self._directive(state)
                )
            if execution_max_turns <= state.turns:
                used = state.turns
                reason = (
                    f"the step has used {used} turns; a new bound must be larger, not {execution_max_turns}"
                )
                raise Refusal(reason, self._directive(state))
            entry = RaiseTurns(
                seq=state.seq + 1,
                at=self.clock(),
                by="caller",
                step=step.id,
                execution_max_turns=execution_max_turns,
            )
            return self._commit(self._applied(state, entry))

    def _applied(self, state: ProcessState, entry: Entry) -> Applied:
        """The one point where what an agent, a driver or a caller handed in becomes a
        journal entry: its configured secrets redacted (`runtime.entries`), then settled."""
        entry = redacted(entry)
        return Applied(state, settle(self.plan, state, entry), entry)

    def _commit(self, applied: Applied) -> Directive:
        after = leave(self.plan, applied.settled, applied.entry.at)
        self.store.commit([applied], after)
        return self._directive(after)

    def _directive(self, state: ProcessState) -> Directive:
        step = self.plan.step(state.step_id) if state.step_id else None
        return Directive(
            self.process_id,
            attempt_id(self.process_id, state.seq),
            state,
            step,
            self.workflow,
            self.llms,
            self.learnings,
        )

    def _entry(self, state: ProcessState, reply: Reply, by: str) -> Entry:
        step_id = state.step_id or ""
        step = self.plan.step(step_id)
        head = Head(seq=state.seq + 1, at=self.clock(), by=by, step=step_id)
        if step.kind == "todo_task" and by == "agent" and state.node != "delegated":
            closed = orchestrator.script_only(step, state, self.fast_path_only) or orchestrator.out_of_turns(
                step, state, self.process_id
            )
            if closed is not None:
                raise InvalidReply(closed)
        match reply:
            case IntakeReply():
                if step.ready_tasks is None:
                    _check_constraints(reply.tasks, (), _COMPOSED)
                    tasks: tuple[Task, ...] | None = _tasks(reply.tasks)
                else:
                    _check_ready(reply, step.ready_tasks)  # passed on unchanged: the run's plan holds it
                    tasks = None
                return SubmitTasks(
                    **head, tasks=tasks, progress_checklist_outcome=reply.progress_checklist_outcome
                )
            case WorkReply() | SubAgentFailedReply() if state.node == "delegated":
                return orchestrator.sub_agent(head, step, state, reply, self.files)
            case WorkReply():
                return Confirm(
                    **head,
                    position=state.position,
                    evidence=reply.evidence,
                    progress_execution_outcome=reply.progress_execution_outcome,
                )
            case TeleportReply():
                if state.node != "work" or step.kind != "todo_task":
                    raise InvalidReply(
                        "teleportTo is only possible while working on a task of a todo_task step"
                    )
                return Teleport(**head, position=state.position)
            case RevisionReply():
                revised = _kept_constraints(_tasks(reply.tasks), state.tasks)
                _check_constraints(reply.tasks, [task.constraints for task in revised], _REVISED)
                return Revise(
                    **head,
                    tasks=revised,
                    resume_from_task=reply.resume_from_task,
                    progress_checklist_outcome=reply.progress_checklist_outcome,
                    progress_execution_outcome=reply.progress_execution_outcome,
                )
            case DelegateReply() | ContinueReply() | CompleteReply():
                return orchestrator.decision(head, step, state, reply)
            case CreateTodoReply() | UpdateTodoReply() | CompleteTodoReply():
                return orchestrator.tool(head, step, state, reply, self.files)
            case SubAgentFailedReply():
                raise InvalidReply("`failed` is a delegated sub-agent's answer; no todo is delegated now")

    def _check_outputs(self, settled: ProcessState) -> None:
        step = self.plan.step(settled.step_id or "")
        for name in step.expected_files:
            problem = self.files.missing(name)
            if problem is not None:
                raise InvalidReply(f"step `{step.id}` cannot complete: its expected file {problem}")


def _tasks(items: list[TaskItem]) -> tuple[Task, ...]:
    return tuple(Task(item.action, item.expected_result) for item in items)


def _kept_constraints(tasks: tuple[Task, ...], old: tuple[Task, ...]) -> tuple[Task, ...]:
    """A revised task left as it was at its position keeps its constraints and priority
    (an agent's reply carries neither: the source or create_todo gave them)."""
    return tuple(
        replace(task, constraints=old[i].constraints, priority=old[i].priority)
        if i < len(old) and (task.action, task.expected_result) == (old[i].action, old[i].expected_result)
        else task
        for i, task in enumerate(tasks)
    )


_COMPOSED = (
    "{names}: a checklist the agent composes has no constraints; only a ready checklist's tasks carry them"
)
_REVISED = (
    "{names} {differ} from the ones these tasks keep: a task keeps its constraints where it stays "
    "unchanged at its position; pass them on as handed out, or leave them out"
)


def _check_ready(reply: IntakeReply, ready: tuple[Task, ...]) -> None:
    """A ready checklist belongs to its author: it is passed on as it is, constraints
    included or left out (the plan holds them either way)."""
    if len(reply.tasks) != len(ready):
        raise InvalidReply(
            f"tasks holds {len(reply.tasks)} tasks; the ready checklist has {len(ready)}, passed on unchanged"
        )
    for field in ("action", "expected_result"):
        differ = [
            i
            for i, (given, task) in enumerate(zip(reply.tasks, ready, strict=True))
            if getattr(given, field) != getattr(task, field)
        ]
        if differ:
            raise InvalidReply(
                f"{_items(differ, field)} from the ready checklist; pass its wording on unchanged"
            )
    _check_constraints(
        reply.tasks,
        [task.constraints for task in ready],
        "{names} {differ} from the ready checklist's; pass them on as handed out, or leave them out "
        "(the plan keeps them)",
    )


def _check_constraints(items: Sequence[TaskItem], kept: Sequence[tuple[str, ...]], why: str) -> None:
    """Constraints come from a checklist's author, never from an agent: a reply may carry
    a task's back as it received them, and every item that differs is named at once
    (`why` names them, `{names}`, and agrees with their number, `{differ}`)."""
    differ = [
        i
        for i, item in enumerate(items)
        if item.constraints is not None and tuple(item.constraints) != (kept[i] if i < len(kept) else ())
    ]
    if differ:
        names = ", ".join(f"tasks[{i}].constraints" for i in differ)
        raise InvalidReply(why.format(names=names, differ="differs" if len(differ) == 1 else "differ"))


def _items(indexes: Sequence[int], field: str) -> str:
    """`tasks[0].action differs` or `tasks[0].action, tasks[2].action differ`."""
    names = ", ".join(f"tasks[{i}].{field}" for i in indexes)
    return f"{names} {'differs' if len(indexes) == 1 else 'differ'}"


def _llm_call(head: Head, call: Usage) -> LlmCall:
    return LlmCall(
        **head,
        agent=call.agent,
        provider=call.llm.provider,
        model_id=call.llm.model_id,
        rule=call.rule,
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        latency_ms=call.latency_ms,
    )


def _tool_called(head: Head, call: ToolUse) -> ToolCalled:
    detail = call.detail
    exit_code = detail.get("exit_code")
    return ToolCalled(
        **head,
        agent=call.agent,
        todo=call.todo,
        tool=call.tool,
        arguments_sha256=call.arguments_sha256,
        arguments_bytes=call.arguments_bytes,
        result_bytes=call.result_bytes,
        duration_ms=call.duration_ms,
        refused=call.refused,
        file=_text(detail.get("file")),
        file_sha256=_text(detail.get("sha256")),
        command=_text(detail.get("command")),
        exit_code=exit_code if isinstance(exit_code, int) else None,
    )


def _text(value: str | int | None) -> str | None:
    return None if value is None else str(value)
