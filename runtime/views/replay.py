"""A run's journal against another definition (`todoflow replay`, `diff --runs`): each
entry folded, in order, through the engine with NEW's plan — the same settle and refusal
rules, no agent, no model, writing nothing — and what became of it.

Each entry is turned back into what made it, by one small function per entry kind
(`_ASKS`): an agent's reply, or the caller's action (a ready checklist passed on, turns
raised, a fast path started or failed, model calls recorded). It is offered to a real
`Engine` over a `memory://` location that started NEW as the run started (its process
id, start time, goal, ready checklists, models and learnings), at the time the journal
gives, and only where the run made it: the same step, node, task and delegation.
There it `holds` (accepted), is `refused` (the engine's reason, word for word; a route's
work that passed prevalidation and fails it under NEW is refused too, and goes back to
the orchestrator as it would), or else it is `unreachable`. Against the run's own
definition every entry holds and the replay ends in the run's own state, to the
attempt id and the timestamps.

What the workspace held is part of the journal (`JournalFiles`): a route's answer
records the expected files it found and their sha256, and a step completed only with its
expected files there. Replay takes those as facts rather than the workspace as it is now,
which has moved on since; a file NEW expects that the run never checked is not known to
be there, unless `check_workspace` looks it up in the workspace as it is now.

A view: it imports the core and `store.base` only, opens the run read-only, and keeps
NEW's run in memory.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from todoflow.compiler.formats import DiffRun, DiffSide, Replay, ReplayEntry, ReplayRun, ReplayStand
from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import replace

from .. import process
from ..definition import RunDefinition
from ..directive import Directive
from ..engine import Engine, Refusal
from ..entries import (
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
    tool_detail,
)
from ..llm_choice import ToolUse, Usage
from ..orchestrator import learn_code, todo_id
from ..plan import Llm, RunPlan, Task
from ..replies import TELEPORT
from ..state import ProcessState, attempt_id
from ..store.base import READY, RunMeta, Runs, Store, final_todos, runs_at
from ..workspace import Prevalidation, checked, file_digest, missing
from .card import card_text

Outcome = Literal["holds", "refused", "unreachable"]
HOLDS: Final = "holds"
REFUSED: Final = "refused"
UNREACHABLE: Final = "unreachable"
Send = Callable[[Engine, str], Directive]  # offers the entry's reply (or action) with the attempt id
Row = dict[str, Any]  # an entry's outcome: a `ReplayEntry` as data (the report validates them at once)


class Ask(NamedTuple):
    """What made an entry, and where: the node, the cursor and the delegated agent it was
    made at (None: any), and how to make it again."""

    send: Send
    node: str | None = None
    position: int | None = None
    agent: str | None = None
    unless: str | None = None  # why nothing would make it under NEW, even there


class Result(NamedTuple):
    """A replay: its report, the directive NEW would hand out next, and NEW's run."""

    report: Replay
    directive: Directive  # the one NEW would hand out next
    store: Store  # NEW's run, in memory: its journal is what NEW accepted

    def card(self) -> str:
        """The run card of where the run would stand (what `todoflow status` would show)."""
        state = self.directive.state
        return card_text(self.directive, final_todos(self.store, state.completed_steps))


def replay(
    runs: Runs, process_id: str, against: RunDefinition, shown: str, check_workspace: bool = False
) -> Result:
    """Run `process_id`'s journal (at `runs`) through the engine with `against`'s plan;
    `shown` names NEW as the report does. The run is only read."""
    with process.open_process(runs, process_id)[0] as engine:
        now = engine.directive()  # a damaged run is refused here, saying what is wrong
        meta = runs.read_meta(process_id)
        entries = engine.store.entries()
        files = JournalFiles(engine.store.plan, engine.workspace if check_workspace else None)
        clock = _Clock(meta.started_at)
        location = runs_at(f"memory://replay-{secrets.token_hex(8)}")
        try:
            ready = _ready(runs.plan_file(process_id, READY), against.plan)
            new = _started(against, engine, meta, ready, location, clock, files)
            walker = _Walker(new, files, clock, engine.store.plan, _completions(entries, now.state))
            outcomes = [walker.offer(entry) for entry in entries]
            directive = new.directive()
        finally:
            location.close()
        run = ReplayRun(
            process_id=process_id,
            workflow_id=meta.workflow_id,
            source=meta.source,
            source_sha256=meta.source_sha256,
            status=now.status(runs.driven(process_id)),  # type: ignore[arg-type]
            entries=len(entries),
        )
    side = DiffSide(
        path=shown, workflow_id=against.workflow_id, title=against.title, source_sha256=against.source_sha256
    )
    report = Replay.model_validate(
        {
            "run": run,
            "against": side,
            "check_workspace": check_workspace,
            **_verdict(outcomes),
            "entries": outcomes,  # validated at once: a thousand entries cost one call
            "stands": _stands(directive),
            "directive": directive.to_json(),
        }
    )
    return Result(report, directive, new.store)


def _started(
    against: RunDefinition,
    old: Engine,
    meta: RunMeta,
    ready: dict[str, tuple[Task, ...]],
    location: Runs,
    clock: _Clock,
    files: JournalFiles,
) -> Engine:
    """NEW's engine of the run, started as the run started (the one start path), at the
    run's time: its process id, goal and ready checklists, workspace, models and learnings."""
    process.start(
        against,
        location,
        workspace=old.workspace,
        ready=ready,
        goal=meta.goal,
        process_id=meta.process_id,
        clock=clock,
    ).close()
    store = location.load(meta.process_id).store
    workflow = {"id": against.workflow_id, "title": store.plan.title}
    return Engine(
        store, old.workspace, workflow, clock, old.llms, old.learnings, old.fast_path_only, old.scripts, files
    )


class _Clock:
    """The journal's time: each entry is made again at the time it was made."""

    def __init__(self, at: str) -> None:
        self.at = at

    def __call__(self) -> str:
        return self.at


class _Walker:
    """NEW's engine, offered the run's entries one at a time."""

    def __init__(
        self, engine: Engine, files: JournalFiles, clock: _Clock, old: RunPlan, completions: dict[int, str]
    ) -> None:
        self.engine, self.files, self.clock, self.old = engine, files, clock, old
        self.completions = completions  # entry seq -> the step the run completed with it
        self.state = engine.directive().state

    def offer(self, entry: Entry) -> Row:
        self.files.learn(entry, self._completed(entry))
        ask = _ASKS[type(entry)](entry, self)
        away = _away(self.state, entry, ask)
        if away is not None:
            return _outcome(entry, UNREACHABLE, away)
        self.clock.at = entry.at
        try:
            directive = ask.send(self.engine, attempt_id(self.engine.process_id, self.state.seq))
        except Refusal as refusal:
            return _outcome(entry, REFUSED, refusal.reason)
        before, self.state = self.state, directive.state
        failed = (
            _failed(self.engine.store, before) if isinstance(entry, SubAgentDone) and entry.passed else None
        )
        if failed is not None:  # the route's work passed in the run, not under NEW: it goes back
            return _outcome(entry, REFUSED, failed)
        return _outcome(entry, HOLDS, None)

    def _completed(self, entry: Entry) -> tuple[str, ...]:
        """The expected files of the step the run completed with `entry` (they were there)."""
        step_id = self.completions.get(entry.seq)
        return () if step_id is None else self.old.step(step_id).expected_files

    def ready(self, step_id: str) -> tuple[Task, ...]:
        tasks = self.old.step(step_id).ready_tasks
        assert tasks is not None, f"the run passed on a ready checklist step `{step_id}` does not have"
        return tasks

    def learn_code(self, step_id: str) -> bool:
        step = self.engine.plan.by_id.get(step_id)
        return step is not None and learn_code(step)


def _failed(store: Store, before: ProcessState) -> str | None:
    """Why the route's answer just made failed its prevalidation, or None (it passed)."""
    made = store.entries(before.seq)[-1]
    return made.reason if isinstance(made, SubAgentDone) and not made.passed else None


def _completions(entries: list[Entry], now: ProcessState) -> dict[int, str]:
    """The entry that completed each step the run completed: its step's last (a step runs
    once: the steps of a workflow never loop)."""
    last = {entry.step: entry.seq for entry in entries}
    return {last[step]: step for step in now.completed_steps if step in last}


def _away(state: ProcessState, entry: Entry, ask: Ask) -> str | None:
    """Why the run under NEW is not where the entry was made, or None."""
    delegated = state.delegation.agent if state.delegation is not None else None
    if (
        state.finished
        or state.step_id != entry.step
        or (ask.node is not None and state.node != ask.node)
        or (ask.position is not None and state.position != ask.position)
        or (ask.agent is not None and delegated != ask.agent)
    ):
        return f"under NEW the run is at {_where(state)}"
    return ask.unless


def _where(state: ProcessState) -> str:
    """A place of a run in words: `step `ship`, work on task 2`."""
    if state.finished:
        return "the end of the workflow (complete)"
    step = f"step `{state.step_id}`"
    if state.node == "work":
        return f"{step}, work on task {state.position}"
    if state.node == "delegated" and state.delegation is not None:
        return f"{step}, task {state.position} delegated to `{state.delegation.agent}`"
    return f"{step}, {state.node}"


def _outcome(entry: Entry, outcome: Outcome, reason: str | None) -> Row:
    return {
        "seq": entry.seq,
        "type": entry.TYPE,
        "step": entry.step,
        "by": entry.by,
        "outcome": outcome,
        "reason": reason,
    }


def _verdict(outcomes: list[Row]) -> dict[str, Any]:
    first = next((o for o in outcomes if o["outcome"] != HOLDS), None)
    refusal = next((o for o in outcomes if o["outcome"] == REFUSED), None)
    if first is None:
        verdict = "compatible"
    else:
        verdict = "compatible with refusals" if first["outcome"] == REFUSED else "incompatible"
    return {"verdict": verdict, "from_entry": first and first["seq"], "first_refusal": refusal}


def _stands(directive: Directive) -> ReplayStand:
    state = directive.state
    return ReplayStand(
        step=state.step_id,
        node=state.node,  # type: ignore[arg-type]
        position=state.position,
        total=state.total,
        role=directive.role,
        status=directive.status(driven=False),  # type: ignore[arg-type]
        completed_steps=list(state.completed_steps),
        attempt_id=None if directive.completed else directive.attempt_id,
    )


def _ready(text: str | None, plan: RunPlan) -> dict[str, tuple[Task, ...]]:
    """The caller's ready checklists the run started with, for the steps NEW has that take
    one (a checklist is the caller's, not the definition's: it goes with the run)."""
    data = json.loads(text) if text is not None else {}
    return {
        step: tuple(map(Task.from_dict, tasks))
        for step, tasks in data.items()
        if step in plan.by_id and plan.step(step).kind == "todo_task"
    }


# -- what made each kind of entry ----------------------------------------------------------


AskFor = Callable[[Any, "_Walker"], Ask]
_ASKS: dict[type[Any], AskFor] = {}  # one handler per entry kind: what made it, and where


def _asks(*kinds: type[Any]) -> Callable[[AskFor], AskFor]:
    def add(handler: AskFor) -> AskFor:
        for kind in kinds:
            _ASKS[kind] = handler
        return handler

    return add


def asked_kinds() -> frozenset[type[Any]]:
    """The entry kinds a replay makes again (a test holds it equal to `entries.KINDS`)."""
    return frozenset(_ASKS)


def _reply(data: dict[str, Any], by: str) -> Send:
    return lambda engine, attempt: engine.step(attempt, data, by)


def _given(**fields: Any) -> dict[str, Any]:
    """A reply's fields, those the entry does not have left out (as an agent leaves them)."""
    return {name: value for name, value in fields.items() if value is not None}


def _items(tasks: Iterable[Task]) -> list[dict[str, str]]:
    return [{"action": task.action, "expected_result": task.expected_result} for task in tasks]


@_asks(SubmitTasks)
def _submit_tasks(entry: SubmitTasks, walker: _Walker) -> Ask:
    tasks = entry.tasks if entry.tasks is not None else walker.ready(entry.step)
    data = {"tasks": _items(tasks), "progress_checklist_outcome": entry.progress_checklist_outcome}
    return Ask(_reply(data, entry.by), "intake")


@_asks(Confirm)
def _confirm(entry: Confirm, walker: _Walker) -> Ask:
    data = {"evidence": entry.evidence, "progress_execution_outcome": entry.progress_execution_outcome}
    return Ask(_reply(data, entry.by), "work", entry.position)


@_asks(Teleport)
def _teleport(entry: Teleport, walker: _Walker) -> Ask:
    return Ask(_reply({"teleportTo": TELEPORT}, entry.by), "work", entry.position)


@_asks(Revise)
def _revise(entry: Revise, walker: _Walker) -> Ask:
    data = {
        "tasks": _items(entry.tasks),
        "resume_from_task": entry.resume_from_task,
        "progress_checklist_outcome": entry.progress_checklist_outcome,
        "progress_execution_outcome": entry.progress_execution_outcome,
    }
    return Ask(_reply(data, entry.by), "revise")


@_asks(Delegate)
def _delegate(entry: Delegate, walker: _Walker) -> Ask:
    data = _given(
        next_action="delegate",
        selected_route_id=entry.selected_route_id,
        use_generic_agent=entry.use_generic_agent or None,
        todo_id_to_execute=todo_id(entry.position),
        instructions_to_sub_agent=entry.instructions_to_sub_agent,
        success_criteria_for_sub_agent=entry.success_criteria_for_sub_agent,
        selection_reasoning=entry.selection_reasoning,
        progress_summary=entry.progress_summary,
        all_tasks_complete=entry.all_tasks_complete or None,
    )
    return Ask(_reply(data, entry.by), "work", entry.position)


@_asks(Continue)
def _continue(entry: Continue, walker: _Walker) -> Ask:
    data = _given(
        next_action="continue",
        selection_reasoning=entry.selection_reasoning,
        progress_summary=entry.progress_summary,
        all_tasks_complete=entry.all_tasks_complete or None,
    )
    return Ask(_reply(data, entry.by), "work", entry.position)


@_asks(SubAgentDone)
def _sub_agent_done(entry: SubAgentDone, walker: _Walker) -> Ask:
    data = {"evidence": entry.evidence, "progress_execution_outcome": entry.progress_execution_outcome}
    return Ask(_reply(data, entry.by), "delegated", entry.position, entry.agent)


@_asks(SubAgentFailed)
def _sub_agent_failed(entry: SubAgentFailed, walker: _Walker) -> Ask:
    return Ask(_reply({"failed": entry.failed}, entry.by), "delegated", entry.position, entry.agent)


@_asks(CreateTodo)
def _create_todo(entry: CreateTodo, walker: _Walker) -> Ask:
    call = {"title": entry.title, "description": entry.description, "priority": entry.priority}
    return Ask(_reply({"create_todo": call}, entry.by), "work")


@_asks(UpdateTodo)
def _update_todo(entry: UpdateTodo, walker: _Walker) -> Ask:
    call = _given(todo_id=todo_id(entry.position), status=entry.status, notes=entry.notes)
    if entry.agent == ORCHESTRATOR:
        return Ask(_reply({"update_todo": call}, entry.by), "work")
    return Ask(_reply({"update_todo": call}, entry.by), "delegated", agent=entry.agent)


@_asks(RaiseTurns)
def _raise_turns(entry: RaiseTurns, walker: _Walker) -> Ask:
    return Ask(lambda engine, attempt: engine.raise_turns(attempt, entry.execution_max_turns))


@_asks(LlmCall)
def _llm_call(entry: LlmCall, walker: _Walker) -> Ask:
    usage = Usage(
        entry.agent,
        Llm(entry.provider, entry.model_id),
        entry.rule,
        entry.prompt_tokens,
        entry.completion_tokens,
        entry.latency_ms,
    )
    return Ask(lambda engine, attempt: engine.record_usage(attempt, [usage]))


@_asks(ToolCalled)
def _tool_called(entry: ToolCalled, walker: _Walker) -> Ask:
    use = ToolUse(
        agent=entry.agent,
        tool=entry.tool,
        todo=entry.todo,
        arguments_sha256=entry.arguments_sha256,
        arguments_bytes=entry.arguments_bytes,
        result_bytes=entry.result_bytes,
        duration_ms=entry.duration_ms,
        refused=entry.refused,
        detail=tool_detail(entry),
    )
    return Ask(lambda engine, attempt: engine.record_usage(attempt, [use]))


@_asks(CommandStarted)
def _command_started(entry: CommandStarted, walker: _Walker) -> Ask:
    """The driver's record of a command as it started, in the turn that ran it."""
    return Ask(_journaled(entry))


@_asks(FastPathStarted, FastPathFailed)
def _fast_path(entry: FastPathStarted | FastPathFailed, walker: _Walker) -> Ask:
    """The runner's own entries, made only at a learn_code step."""
    unless = (
        None
        if walker.learn_code(entry.step)
        else f"step `{entry.step}` is not a learn_code step under NEW: no fast path runs there"
    )
    return Ask(_journaled(entry), unless=unless)


def _journaled(entry: Entry) -> Callable[[Engine, str], Directive]:
    """The driver's own entry journaled again, at the seq and time the replay gives it."""
    return lambda engine, attempt: engine.journal(attempt, lambda seq, at: replace(entry, seq=seq, at=at))


# -- the workspace, as the journal recorded it -------------------------------------------


class JournalFiles:
    """The workspace as the run's journal recorded it: the `Files` NEW's engine asks.

    A file is there if a route's answer found it (with its sha256) or a step the run
    completed expected it, by the entry being replayed; a route's answer checked against
    the files the run checked it against is prevalidated as the journal says. A file the
    run never checked is not known to be there (with a workspace: looked up in it)."""

    def __init__(self, old: RunPlan, workspace: Path | None) -> None:
        self.old, self.workspace = old, workspace
        self.found: dict[str, str] = {}  # every file a route's answer found, with its sha256
        self.completed: set[str] = set()  # every expected file of a step the run completed
        self.answer: SubAgentDone | None = None  # the route's answer being replayed

    def learn(self, entry: Entry, completed: tuple[str, ...]) -> None:
        """What the journal says of the workspace up to `entry` (which completed a step
        expecting `completed`)."""
        self.answer = entry if isinstance(entry, SubAgentDone) else None
        if self.answer is not None:
            self.found.update(self.answer.files)
        self.completed.update(completed)

    def missing(self, name: str) -> str | None:
        if name in self.found or name in self.completed:
            return None
        if self.workspace is not None:
            return missing(self.workspace, name)
        return _unknown(name)

    def prevalidate(self, expected: Iterable[str]) -> Prevalidation:
        names = tuple(expected)
        answer = self.answer
        checked_then = self._checked(answer)
        if answer is not None and checked_then == names:
            return Prevalidation(answer.passed, answer.reason, answer.files)
        recorded = dict(answer.files) if answer is not None else {}
        found, problems = [], []
        for name in names:
            digest = recorded.get(name) or self.found.get(name)
            if digest is not None:
                found.append((name, digest))
            elif name in checked_then:
                problems.append(f"`{name}` was not there when the run checked it")
            elif self.workspace is not None:
                looked = file_digest(self.workspace, name)
                found += [looked] if isinstance(looked, tuple) else []
                problems += [looked] if isinstance(looked, str) else []
            else:
                problems.append(_unknown(name))
        return checked(found, problems)

    def _checked(self, answer: SubAgentDone | None) -> tuple[str, ...]:
        """The files the run prevalidated `answer` against: its route's, in the run's plan."""
        route = None if answer is None else self.old.step(answer.step).route(answer.agent)
        return () if route is None else route.step.expected_files


def _unknown(name: str) -> str:
    return f"`{name}` is not known to be there: the run never checked it (--check-workspace looks)"


# -- every run of a definition -----------------------------------------------------------


def runs_of(
    runs: Runs, source_sha256: str, against: RunDefinition, shown: str, check_workspace: bool = False
) -> Iterator[DiffRun]:
    """Every run at `runs` whose definition is `source_sha256`'s, newest first, replayed
    against `against`; a run that cannot be read is `damaged`, and the others go on."""
    for process_id, meta in runs.metas():
        if isinstance(meta, TodoflowError):
            if process_id:
                yield DiffRun(process_id=process_id, status="damaged", error=str(meta))
            continue
        if meta.source_sha256 != source_sha256:
            continue
        try:
            report = replay(runs, process_id, against, shown, check_workspace).report
        except TodoflowError as error:
            yield DiffRun(process_id=process_id, status="damaged", error=str(error))
            continue
        first = next((e for e in report.entries if e.seq == report.from_entry), None)
        yield DiffRun(
            process_id=process_id,
            status=report.run.status,
            entries=report.run.entries,
            verdict=report.verdict,
            from_entry=report.from_entry,
            first=first,
            first_refusal=report.first_refusal,
            stands=report.stands,
        )


# -- as text -------------------------------------------------------------------------------

LABELS = {HOLDS: "holds", REFUSED: "refused", UNREACHABLE: "no longer reachable"}


def text(replayed: Result, here: Path) -> str:
    """The replay for people: the entries grouped as they fare, the verdict, and the run
    card of where the run would stand; the old source shown relative to `here` (the
    caller's working folder) when it lies inside it."""
    report = replayed.report
    run, stands = report.run, report.stands
    lines = [
        f"replay of run {run.process_id} ({run.status}, {_count(run.entries)})",
        f"  OLD {_shown(run.source, here)}: source_sha256 {(run.source_sha256 or '?')[:12]}…",
        f"  NEW {report.against.path}: source_sha256 {report.against.source_sha256[:12]}…",
        "",
    ]
    groups = list(_groups(report.entries))
    if groups:
        lines += [*_table(groups), ""]
    verdict = (
        report.verdict if report.from_entry is None else f"{report.verdict} from entry {report.from_entry}"
    )
    lines.append(f"verdict: {verdict}")
    attempt = f" (attempt {stands.attempt_id})" if stands.attempt_id else ""
    lines += ["", f"under NEW the run would stand here{attempt}:", ""]
    return "\n".join(lines) + "\n" + replayed.card()


def _groups(entries: list[ReplayEntry]) -> Iterator[list[ReplayEntry]]:
    """Entries in runs of one step and one outcome (and reason); a refusal stands alone."""
    group: list[ReplayEntry] = []
    for entry in entries:
        if group and (entry.outcome == REFUSED or _key(group[0]) != _key(entry)):
            yield group
            group = []
        group.append(entry)
    if group:
        yield group


def _key(entry: ReplayEntry) -> tuple[str, str, str | None]:
    return entry.step, entry.outcome, entry.reason


def _table(groups: list[list[ReplayEntry]]) -> list[str]:
    rows = [(_seqs(group), group[0].step, LABELS[group[0].outcome], _what(group)) for group in groups]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    return [
        f"  {seqs:<{widths[0]}}  {step:<{widths[1]}}  {label:<{widths[2]}}  {what}".rstrip()
        for seqs, step, label, what in rows
    ]


def _seqs(group: list[ReplayEntry]) -> str:
    first, last = group[0].seq, group[-1].seq
    return str(first) if first == last else f"{first}-{last}"


def _what(group: list[ReplayEntry]) -> str:
    """The kinds of the group's entries (`confirm ×3, teleport`), and the reason."""
    kinds: dict[str, int] = {}
    for entry in group:
        kinds[entry.type] = kinds.get(entry.type, 0) + 1
    what = ", ".join(kind if n == 1 else f"{kind} ×{n}" for kind, n in kinds.items())
    reason = group[0].reason
    return f"{what}: {reason}" if reason else what


def _shown(source: str, here: Path) -> str:
    """A run's source as recorded, relative to `here` when it is inside it."""
    path = Path(source)
    return str(path.relative_to(here)) if path.is_absolute() and path.is_relative_to(here) else source


def _count(entries: int) -> str:
    return f"{entries:,} {'entry' if entries == 1 else 'entries'}"
