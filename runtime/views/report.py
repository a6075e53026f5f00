"""The run report (`todoflow report`): one run as a value, made from the run folder alone.

`read_run` gathers what a report is made of, and is the only part that reads files: the
run's meta, its plan, the execution log (`log.log_json`, from the journal replayed), the
run card (`card.card_svg`), the plan canvas (the run's own plan.json, read back into the
compiler's model) and the learnings this run recorded (from the learnings folder its
meta names). Opening the run writes nothing. `run_report` is a pure function from that
`RunData` to a `Report`: every step with its checklist and its iterations, each with a
stable anchor, the problems, the learnings. `report_html.render` draws it.

Refused replies are not in it: a refusal changes nothing, so the run folder has no
trace of one, by design.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from todoflow.compiler.canvas import Canvas, plan_canvas
from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from ..entries import GENERIC, ORCHESTRATOR, entry_from_json
from ..learnings import LEARNINGS_FILE, Learning, LearningError
from ..plan import RunPlan, RunStep
from ..store.base import RunMeta, Runs, final_todos, runs_at

CALLER = "caller"  # the log's agent of a ready checklist passed on


class ReportError(TodoflowError):
    """A report that cannot be written where it was asked for."""


# -- what the report is made of ----------------------------------------------------------


@node
class RunData:
    meta: RunMeta
    plan: RunPlan
    status: str  # complete, blocked, running, stopped (`Directive.status`)
    where: str  # where the run is: its step and role (`Directive.role`), or why it is blocked
    current_step: str | None  # the step the run is at (None once complete)
    log: Mapping[str, Any]  # `log_json`'s shape
    card: str  # the run card, an SVG
    canvas: Canvas | None
    canvas_problem: str | None  # why there is no canvas
    learnings: tuple[Learning, ...]  # the records this run made, as the folder holds them now
    learnings_problem: str | None  # why the learnings folder could not be read
    gaps: tuple[str, ...] = ()  # what its derived files lack against its journal, undriven (`Engine.gaps`)


def read_run(where: Path | str | Runs, process_id: str) -> RunData:
    """Everything a report shows, read from where the run lives; writes nothing."""
    from ..process import open_process
    from .card import card_svg
    from .log import log_json

    runs = runs_at(where)
    engine, store = open_process(runs, process_id)
    with engine:
        directive = engine.directive()  # a damaged run is refused here, saying what is wrong
        driven = runs.driven(process_id)
        status = directive.status(driven)
        log = log_json(engine.plan, engine.process_id, store.started_at, store.entries())
        finished = final_todos(store, directive.state.completed_steps)
        gaps = () if driven else tuple(engine.gaps())  # a driver brings them up to date
    meta = runs.read_meta(process_id)
    todo_blocked = f"todo blocked: {directive.todo_blocked}" if directive.todo_blocked else None
    where_ = f"step {directive.state.step_id}: {directive.blocked or todo_blocked or directive.role}"
    card = card_svg(directive, finished)
    canvas, canvas_problem = _canvas(runs, process_id, meta)
    learnings, learnings_problem = _learnings(runs, meta)
    return RunData(
        meta,
        engine.plan,
        status,
        "every step done; result {}" if directive.completed else where_,
        directive.state.step_id,
        log,
        card,
        canvas,
        canvas_problem,
        learnings,
        learnings_problem,
        gaps,
    )


def _canvas(runs: Runs, process_id: str, meta: RunMeta) -> tuple[Canvas | None, str | None]:
    """The plan canvas of the run's stored plan: plan.json read back into the compiler's
    model the way `todoflow decompile` does, so it is the canvas `graph --view plan` draws."""
    from todoflow.compiler.analysis import analyze
    from todoflow.compiler.decompile import decompile
    from todoflow.compiler.planfile import read_plan, read_step_config

    try:
        plan_text = runs.plan_file(process_id, "plan.json")
        config_text = runs.plan_file(process_id, "step_config.json")
    except (OSError, UnicodeDecodeError) as error:
        return None, f"its plan cannot be read ({error})"
    if plan_text is None:
        return None, "its plan cannot be read (plan/plan.json is missing)"
    plan = read_plan(plan_text, "plan/plan.json").plan
    config = read_step_config(config_text, "plan/step_config.json")[0] if config_text else None
    if plan is None:
        return None, "its plan.json is not a plan todoflow reads"
    source = decompile(
        plan, config, meta.workflow_id, meta.title or meta.workflow_id, "plan/plan.json"
    ).source
    workflow = analyze(source, "<plan>").workflow if source is not None else None
    if workflow is None:
        return None, "its plan uses what the todoflow language cannot express"
    return plan_canvas(workflow), None


def _learnings(runs: Runs, meta: RunMeta) -> tuple[tuple[Learning, ...], str | None]:
    learnings = runs.learnings(meta)
    if learnings is None:
        return (), None
    try:
        records = learnings.records()
    except LearningError as error:
        return (), str(error)
    return tuple(r for r in records if r.process_id == meta.process_id), None


# -- the report ------------------------------------------------------------------------


@node
class Who:
    """Who did something: `orchestrator`, `route` (a route's sub-agent), `generic` (the
    generic agent), `caller` (a ready checklist passed on) or `agent` (a regular step's)."""

    kind: str
    name: str  # as the report says it


@node
class Confirmation:
    at: str
    who: Who
    evidence: str
    iteration: str  # the anchor of the iteration that confirmed it


@node
class TaskRow:
    anchor: str
    todo_id: str
    position: int
    action: str
    expected_result: str
    constraints: tuple[str, ...]  # as the ready checklist gave them
    priority: str
    status: str  # todos.json's: completed, in_progress, pending, blocked
    result: str | None
    notes: str | None
    assigned: Who | None
    created_at: str
    updated_at: str
    confirmation: Confirmation | None  # None for a task a revision counted done, and open ones


@node
class ListItem:
    """A task in a list an iteration sent; in a revision, what became of it."""

    position: int
    action: str
    expected_result: str
    change: str = ""  # before: `removed`; after: `new`, `moved`, or `` (kept where it was)
    was: int | None = None  # after: its position before the revision


@node
class Revision:
    before: tuple[ListItem, ...]
    after: tuple[ListItem, ...]
    resume_from_task: int


@node
class Validation:
    passed: bool
    reason: str | None
    files: tuple[tuple[str, str], ...]  # (workspace path, sha256)


@node
class RawEntry:
    seq: int
    type: str
    data: Mapping[str, Any]  # the journal line's JSON


@node
class TodoRef:
    todo_id: str
    title: str
    anchor: str | None  # its row in the step's checklist; None: a todo a revision replaced


@node
class LearningRef:
    learning_id: str
    anchor: str | None  # None: the learnings folder has no such record (any more)


@node
class Iteration:
    anchor: str
    number: int
    at: str
    action: str  # the decision: submit_tasks, confirm, delegate, continue, teleport, revise, create_todo, ...
    who: Who | None
    todo: TodoRef | None
    fields: tuple[tuple[str, str], ...]  # (label, text) in the seed's order
    result: str | None  # a delegation's: done or failed
    problems: tuple[tuple[str, str], ...]  # (kind, text): failed validations and delegations, blocks
    validation: Validation | None
    learning: LearningRef | None
    submitted: tuple[ListItem, ...]  # the list an intake sent
    revision: Revision | None
    entries: tuple[RawEntry, ...]


@node
class Step:
    anchor: str
    step_id: str
    title: str
    kind: str
    number: int  # its place in the run, 1-based: the plan canvas's number of the step
    completed: bool
    turns: int | None  # the orchestrator's turns, once complete
    tasks: tuple[TaskRow, ...]
    iterations: tuple[Iteration, ...]

    @property
    def done(self) -> int:
        return sum(t.status == "completed" for t in self.tasks)


@node
class Problem:
    kind: str  # prevalidation failed, delegation failed, todo blocked
    text: str
    step_id: str
    iteration: str  # its anchor
    todo: TodoRef | None


@node
class LearningItem:
    anchor: str
    record: Learning
    file: str  # the record's file, relative to the learnings folder
    iteration: str | None  # the anchor of the iteration that recorded it


@node
class Report:
    title: str
    process_id: str
    status: str
    where: str
    facts: tuple[tuple[str, str], ...]  # (label, value): who the run is
    card: str
    canvas: Canvas | None
    canvas_problem: str | None
    visited: tuple[str, ...]  # the canvas node ids the run went through
    steps: tuple[Step, ...]
    problems: tuple[Problem, ...]
    learnings: tuple[LearningItem, ...]
    learnings_folder: str | None
    learnings_problem: str | None
    missing_learnings: tuple[str, ...]  # ids the journal proves that the folder lacks


def anchor(*parts: str) -> str:
    """An HTML id from `parts` joined by `-`: letters, digits, `-` and `_` kept, every
    other character written `.<hex>.`, so different texts never share an anchor and the
    id needs no escaping in an attribute, a URL fragment or a CSS selector's string."""
    return "-".join(re.sub(r"[^A-Za-z0-9_-]", lambda m: f".{ord(m[0]):x}.", part) for part in parts)


class _Anchors:
    """Anchors made unique: a second `step-a` (a step run twice, or a step id that reads
    like another step's task anchor) gets `~2`, a character `anchor` never writes."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, *parts: str) -> str:
        base = found = anchor(*parts)
        count = 1
        while found in self.used:
            count += 1
            found = f"{base}~{count}"
        self.used.add(found)
        return found


def run_report(data: RunData) -> Report:
    """The report of a run: a pure function of what `read_run` gathered."""
    anchors = _Anchors()
    learned = {record.id: anchors("learning", record.id) for record in data.learnings}
    steps = tuple(
        _step(data.plan, found, number, anchors, learned) for number, found in enumerate(data.log["steps"], 1)
    )
    recorded = {i.learning.learning_id: i.anchor for s in steps for i in s.iterations if i.learning}
    meta = data.meta
    return Report(
        title=data.plan.title,
        process_id=meta.process_id,
        status=data.status,
        where=data.where,
        facts=_facts(meta),
        card=data.card,
        canvas=data.canvas,
        canvas_problem=data.canvas_problem,
        visited=_visited(data, steps),
        steps=steps,
        problems=tuple(
            Problem(kind, text, s.step_id, i.anchor, i.todo)
            for s in steps
            for i in s.iterations
            for kind, text in i.problems
        ),
        learnings=tuple(
            LearningItem(learned[r.id], r, f"{r.sub_step_id}/{LEARNINGS_FILE}", recorded.get(r.id))
            for r in data.learnings
        ),
        learnings_folder=meta.learnings,
        learnings_problem=data.learnings_problem,
        missing_learnings=tuple(sorted(set(recorded) - set(learned))),
    )


def _facts(meta: RunMeta) -> tuple[tuple[str, str], ...]:
    facts = [
        ("workflow", meta.workflow_id),
        ("process", meta.process_id),
        ("started", meta.started_at),
        ("source", meta.source),
        ("source sha256", meta.source_sha256),
        ("workspace", meta.workspace),
        ("learnings", meta.learnings),
        ("driven by", meta.agent),
        ("goal", meta.goal),
        ("default model", meta.llm),
        ("preset model", meta.preset_llm),
        ("parent execution", meta.parent_execution_id),
    ]
    return tuple((label, value) for label, value in facts if value)


def who(step: RunStep, agent: str) -> Who:
    """What the report calls an agent of `step`: its orchestrator, a route, the generic agent."""
    if agent == ORCHESTRATOR:
        return (
            Who(ORCHESTRATOR, ORCHESTRATOR) if step.kind == "todo_task" else Who("agent", "the step's agent")
        )
    if agent == CALLER:
        return Who(CALLER, "caller (the ready checklist, passed on)")
    if agent == GENERIC:
        return Who(GENERIC, "generic agent")
    route = step.route(agent)
    return Who("route", f"route {agent}" + (f" (sub-agent {route.step_id})" if route else ""))


def _step(
    plan: RunPlan, found: Mapping[str, Any], number: int, anchors: _Anchors, learned: Mapping[str, str]
) -> Step:
    step = plan.step(found["step_id"])
    own = anchors("step", step.id)
    numbers = {
        i["iteration"]: anchors("step", step.id, "iteration", str(i["iteration"]))
        for i in found["iterations"]
    }
    tasks = tuple(
        _task(step, item, anchors("step", step.id, "task", str(n)), numbers)
        for n, item in enumerate(found["todos"], 1)
    )
    final = {t.todo_id: t for t in tasks}
    return Step(
        anchor=own,
        step_id=step.id,
        title=step.title,
        kind=step.kind,
        number=number,
        completed=found["completed"],
        turns=found.get("turns"),
        tasks=tasks,
        iterations=tuple(
            _iteration(step, i, numbers[i["iteration"]], final, learned) for i in found["iterations"]
        ),
    )


def _task(step: RunStep, item: Mapping[str, Any], own: str, iterations: Mapping[int, str]) -> TaskRow:
    confirmed = item.get("confirmation")
    return TaskRow(
        anchor=own,
        todo_id=item["id"],
        position=int(item["id"].removeprefix("todo_")),
        action=item["title"],
        expected_result=item["description"],
        constraints=tuple(item.get("constraints", ())),
        priority=item["priority"],
        status=item["status"],
        result=item.get("result"),
        notes=item.get("notes"),
        assigned=who(step, item["assigned_agent"]) if item.get("assigned_agent") else None,
        created_at=item["created_at"],
        updated_at=item["updated_at"],
        confirmation=None
        if confirmed is None
        else Confirmation(
            confirmed["at"],
            who(step, confirmed["agent"]),
            confirmed["evidence"],
            iterations[confirmed["iteration"]],
        ),
    )


# the seed's execution-log fields, in its order: (the log's key, the label)
FIELDS = (
    ("reasoning", "reasoning"),
    ("instructions", "instructions"),
    ("success_criteria", "success criteria"),
    ("progress_summary", "progress summary"),
    ("evidence", "evidence"),
    ("outcome", "outcome"),
    ("failure", "failure"),
)


def _iteration(
    step: RunStep,
    found: Mapping[str, Any],
    own: str,
    final: Mapping[str, TaskRow],
    learned: Mapping[str, str],
) -> Iteration:
    todo = None
    if "todo_id" in found:
        task = final.get(found["todo_id"])
        same = task is not None and task.action == found["todo_title"]  # not a todo a revision replaced
        todo = TodoRef(found["todo_id"], found["todo_title"], task.anchor if task and same else None)
    validation = found.get("validation")
    learning = found.get("learning_id")
    return Iteration(
        anchor=own,
        number=found["iteration"],
        at=found["at"],
        action=found.get("action", "answer"),
        who=who(step, found["agent"]) if found.get("agent") else None,
        todo=todo,
        fields=tuple((label, str(found[key])) for key, label in FIELDS if found.get(key))
        + _notes(found)
        + _tool_calls(found),
        result=found.get("result"),
        problems=_problems(found),
        validation=None
        if validation is None
        else Validation(
            validation["passed"],
            validation["reason"],
            tuple((f["path"], f["sha256"]) for f in validation["files"]),
        ),
        learning=None if learning is None else LearningRef(learning, learned.get(learning)),
        submitted=tuple(_items(found["tasks"])) if "tasks" in found else (),
        revision=_revision(found) if "after" in found else None,
        entries=tuple(_raw(data) for data in found["entries"]),
    )


def _tool_calls(found: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The agent's commands started and tool calls of the iteration, one line each, as the
    log shows them."""
    from .log import started_line, tool_line

    started = tuple(("command", started_line(each)) for each in found.get("commands_started", []))
    return started + tuple(("tool", tool_line(call)) for call in found.get("tool_calls", []))


def _raw(data: Mapping[str, Any]) -> RawEntry:
    entry = entry_from_json(data)
    return RawEntry(entry.seq, entry.TYPE, data)


def _notes(found: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The todo tools' calls and the caller's entries of an iteration, as labelled lines."""
    out = []
    if "created" in found:
        out.append(("created todo", found["created"]["title"]))
    for update in _updates(found):
        said = [f"status {update['status']}"] if update["status"] else []
        said += [f"notes: {update['notes']}"] if update["notes"] else []
        out.append((f"update by {update['agent']}", "; ".join(said) or "no change"))
    for call in found.get("caller", []):
        out.append(("caller", f"raised the bound on orchestrator turns to {call['raise_turns']}"))
    return tuple(out)


def _updates(found: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The iteration's update_todo calls: the orchestrator's own, then its sub-agent's."""
    own: list[Mapping[str, Any]] = [found["update"]] if "update" in found else []
    return own + list(found.get("updates", []))


def _problems(found: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    out = []
    validation = found.get("validation")
    if validation is not None and not validation["passed"]:
        out.append(("prevalidation failed", validation["reason"] or "the expected files are not there"))
    elif found.get("result") == "failed":
        out.append(("delegation failed", found.get("failure") or "the sub-agent gave the todo back"))
    for update in _updates(found):
        if update["status"] == "blocked":
            out.append(("todo blocked", update["notes"] or f"marked blocked by {update['agent']}"))
    return tuple(out)


def _items(tasks: Iterable[Mapping[str, Any]]) -> list[ListItem]:
    return [ListItem(t["position"], t["action"], t["expected_result"]) for t in tasks]


def _revision(found: Mapping[str, Any]) -> Revision:
    """Before and after of a revision, each task matched by its wording to where it went."""
    before, after = _items(found["before"]), _items(found["after"])
    unmatched: dict[tuple[str, str], list[int]] = {}  # wording -> its positions before, not yet matched
    for t in before:
        unmatched.setdefault((t.action, t.expected_result), []).append(t.position)
    placed = []
    for t in after:
        left = unmatched.get((t.action, t.expected_result))
        if not left:
            placed.append(ListItem(t.position, t.action, t.expected_result, "new"))
            continue
        was = left.pop(0)
        change = "" if was == t.position else "moved"
        placed.append(ListItem(t.position, t.action, t.expected_result, change, was))
    gone = {p for positions in unmatched.values() for p in positions}
    marked = [
        ListItem(t.position, t.action, t.expected_result, "removed" if t.position in gone else "")
        for t in before
    ]
    return Revision(tuple(marked), tuple(placed), found["resume_from_task"])


def _visited(data: RunData, steps: tuple[Step, ...]) -> tuple[str, ...]:
    """The canvas nodes of the steps the run entered and the sub-agents it delegated to."""
    if data.canvas is None:
        return ()
    entered = {s.step_id for s in steps} | ({data.current_step} if data.current_step else set())
    for found in data.log["steps"]:
        step = data.plan.step(found["step_id"])
        for iteration in found["iterations"]:
            route = step.route(iteration.get("selected_route_id") or "")
            if route is not None:
                entered.add(route.step_id)
    nodes = [
        n.id for n in data.canvas.nodes if n.step_id in entered or (n.kind == "end" and data.log["completed"])
    ]
    return tuple(nodes)
