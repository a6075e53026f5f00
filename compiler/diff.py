"""The semantic diff of two workflow definitions: what NEW changes of OLD, step by step.

Each side is a definition's files as a run stores them (plan.json, step_config.json,
prompts/<step>/<kind>.j2), which `runtime.definition` reads from a `.todoflow` source, a
compiled folder or a plan.json (legacy nested plans flattened): one reader, so a source
and its compiled plan compare equal. Steps are matched by id wherever they are, routes
by route id, checklists by position, because position is a task's identity: a task
inserted before others shifts every later identity, and a run that confirmed one of
those positions confirmed a task NEW words otherwise. What only formatting or comments
change is no difference: the source's hash, a `next` written out where it is the
default, a built-in prompt template written out as a file.

`compare` gives the change set as the `formats.Diff` value that `--format json` prints;
per position it says whether a confirmation under OLD still stands under NEW
(`affects_confirmed`, `first_affected`), which is what a run's verdict is built on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from difflib import SequenceMatcher, unified_diff
from typing import Any, Literal, NamedTuple

from todoflow.dsl.nodes import node

from .formats import (
    ChecklistChange,
    Diff,
    DiffRun,
    DiffSide,
    FieldChange,
    LlmConfig,
    Plan,
    PlanStep,
    PlanTask,
    PredefinedRoute,
    RouteChange,
    StepChange,
    StepConfig,
    StepConfigEntry,
    TaskChange,
    TaskMove,
)
from .prompt_files import prompt_of
from .prompts import KINDS_BY_STEP, SUB_AGENT_KIND, default_template

END = "end"
TASK_FIELDS = ("action", "expected_result", "constraints", "label", "after")


@node
class Side:
    """One definition as the diff reads it: its files, and what names it."""

    path: str  # as given
    files: tuple[tuple[str, str], ...]  # plan.json, step_config.json, prompts/<step>/<kind>.j2
    source_sha256: str
    workflow_id: str | None = None  # None: a plan.json, which names no workflow
    title: str | None = None


class _Placed(NamedTuple):
    step: PlanStep
    place: str  # `step 2`, or `route `build` of `ship``
    top: bool
    next: str | None  # a top-level step's next step, resolved; None inside a route


class _Definition(NamedTuple):
    steps: dict[str, _Placed]  # top-level steps in plan order, each followed by its routes' steps
    order: list[str]  # the top-level step ids in plan order
    configs: dict[str, StepConfigEntry]
    prompts: dict[tuple[str, str], str]  # (step id, kind) -> the template's text

    @classmethod
    def of(cls, side: Side) -> _Definition:
        files = dict(side.files)
        plan = Plan.model_validate_json(files["plan.json"])
        config = StepConfig.model_validate_json(files.get("step_config.json", '{"steps": []}'))
        prompts = {owner: text for relative, text in files.items() if (owner := prompt_of(relative))}
        order = [step.id for step in plan.steps]
        return cls(dict(_placed(plan)), order, {e.id: e for e in config.steps}, prompts)


def _placed(plan: Plan) -> Iterator[tuple[str, _Placed]]:
    ids = [step.id for step in plan.steps]
    for index, step in enumerate(plan.steps):
        following = ids[index + 1] if index + 1 < len(ids) else END
        yield step.id, _Placed(step, f"step {index + 1}", True, step.next_step_id or following)
        yield from _inside(step)


def _inside(step: PlanStep) -> Iterator[tuple[str, _Placed]]:
    for route in step.predefined_routes or []:
        sub = route.sub_agent_step
        yield sub.id, _Placed(sub, f"route `{route.route_id}` of `{step.id}`", False, None)
        yield from _inside(sub)


def compare(old: Side, new: Side) -> Diff:
    """What NEW changes of OLD (`equivalent` when nothing but formatting and comments)."""
    before, after = _Definition.of(old), _Definition.of(new)
    workflow = []
    if old.workflow_id is not None and new.workflow_id is not None:
        workflow = _changes(
            {"id": old.workflow_id, "title": old.title}, {"id": new.workflow_id, "title": new.title}
        )
    steps = list(_steps(before, after))
    return Diff(
        old=_side(old),
        new=_side(new),
        equivalent=not workflow and not steps,
        workflow=workflow or None,
        steps=steps,
    )


def _side(side: Side) -> DiffSide:
    return DiffSide(
        path=side.path, workflow_id=side.workflow_id, title=side.title, source_sha256=side.source_sha256
    )


def _steps(before: _Definition, after: _Definition) -> Iterator[StepChange]:
    moved = _out_of_order(before.order, after.order)
    for step_id, placed in after.steps.items():
        was = before.steps.get(step_id)
        if was is None:
            yield _added(placed, after, "added")
            continue
        change = _changed(was, placed, before, after, step_id in moved)
        if change is not None:
            yield change
    for step_id, placed in before.steps.items():
        if step_id not in after.steps:
            yield _added(placed, before, "removed")


def _out_of_order(old: list[str], new: list[str]) -> set[str]:
    """Top-level steps of both whose order among the others changed (the fewest such)."""
    common = set(old) & set(new)
    a, b = [i for i in old if i in common], [i for i in new if i in common]
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    kept = {a[block.a + k] for block in matcher.get_matching_blocks() for k in range(block.size)}
    return common - kept


def _added(placed: _Placed, definition: _Definition, change: Literal["added", "removed"]) -> StepChange:
    """A step only one side has, with every field it sets (as `new`, or `old` if removed)."""
    step = placed.step
    values = _fields(placed, definition.configs.get(step.id))
    side = "new" if change == "added" else "old"
    fields = [FieldChange(field=k, **{side: v}) for k, v in values.items() if v is not None]
    routes = [
        RouteChange(route=r.route_id, change=change, fields=_one_sided(_route_fields(r), side))
        for r in step.predefined_routes or []
    ]
    tasks = None
    if step.tasks:
        old, new = (None, step.tasks) if change == "added" else (step.tasks, None)
        tasks = _checklist(old, new, composed=False)  # no run of OLD was in an added step
    return StepChange(
        step=step.id,
        change=change,
        kind=step.type,
        title=step.title,
        place=placed.place,
        fields=fields or None,
        routes=routes or None,
        tasks=tasks,
    )


def _one_sided(values: Mapping[str, Any], side: str) -> list[FieldChange]:
    return [FieldChange(field=k, **{side: v}) for k, v in values.items()]


def _changed(
    was: _Placed, now: _Placed, before: _Definition, after: _Definition, out_of_order: bool
) -> StepChange | None:
    step_id = now.step.id
    # a top-level step moved when its order among the others changed (not its number); a
    # route's step, when it is under another route
    moved = out_of_order if was.top and now.top else was.place != now.place
    place = FieldChange(field="place", old=was.place, new=now.place) if moved else None
    fields = _changes(_fields(was, before.configs.get(step_id)), _fields(now, after.configs.get(step_id)))
    routes = _routes(was.step, now.step)
    order = _route_order(was.step, now.step)
    if order is not None:
        fields.append(order)
    prompts = _prompts(was, now, before, after)
    tasks = _checklist(was.step.tasks, now.step.tasks, composed=was.step.tasks is None)
    if place is None and not fields and not routes and not prompts and tasks is None:
        return None
    return StepChange(
        step=step_id,
        change="changed",
        kind=now.step.type,
        title=now.step.title,
        place=now.place,
        moved=place,
        fields=fields or None,
        routes=routes or None,
        prompts=prompts or None,
        tasks=tasks,
    )


def _changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """The fields whose values differ, in the order of `new` (then those only `old` has)."""
    names = [*new, *(k for k in old if k not in new)]
    return [FieldChange(field=k, old=old.get(k), new=new.get(k)) for k in names if old.get(k) != new.get(k)]


def _fields(placed: _Placed, config: StepConfigEntry | None) -> dict[str, Any]:
    """A step's fields by the language's names, each as its plan means it (defaults applied)."""
    step = placed.step
    agent = config.agent_configs if config is not None else None
    files = step.validation_schema.files if step.validation_schema else []
    return {
        "kind": step.type,
        "title": step.title,
        "description": step.description or None,
        "success": step.success_criteria or None,
        "needs": step.context_dependencies or None,
        "output": step.context_output or None,
        "expect": [f.file_name for f in files if f.must_exist] or None,
        "next": placed.next,
        "generic": step.generic_agent is not False if step.type == "todo_task" else None,
        "llm": _llm(agent.execution_llm if agent else None),
        "conditional_llm": _llm(agent.conditional_llm if agent else None),
        "max_turns": agent.execution_max_turns if agent else None,
        "mode": config.declared_execution_mode if config else None,
    }


def _llm(choice: LlmConfig | None) -> str | None:
    return None if choice is None else f"{choice.provider}:{choice.model_id}"


def _route_fields(route: PredefinedRoute) -> dict[str, Any]:
    return {"name": route.route_name, "condition": route.condition, "step": route.sub_agent_step.id}


def _routes(old: PlanStep, new: PlanStep) -> list[RouteChange]:
    before = {r.route_id: r for r in old.predefined_routes or []}
    after = {r.route_id: r for r in new.predefined_routes or []}
    changes = []
    for route_id, route in after.items():
        if route_id not in before:
            changes.append(
                RouteChange(route=route_id, change="added", fields=_one_sided(_route_fields(route), "new"))
            )
        elif fields := _changes(_route_fields(before[route_id]), _route_fields(route)):
            changes.append(RouteChange(route=route_id, change="changed", fields=fields))
    for route_id, route in before.items():
        if route_id not in after:
            changes.append(
                RouteChange(route=route_id, change="removed", fields=_one_sided(_route_fields(route), "old"))
            )
    return changes


def _route_order(old: PlanStep, new: PlanStep) -> FieldChange | None:
    """The order of the routes both sides have, when it changed (the fast path's checklist
    without a ready one is a todo per route, in route order)."""
    before = [r.route_id for r in old.predefined_routes or []]
    after = [r.route_id for r in new.predefined_routes or []]
    common = set(before) & set(after)
    a, b = [r for r in before if r in common], [r for r in after if r in common]
    return None if a == b else FieldChange(field="route order", old=a, new=b)


_TEMPLATES = {kind for kinds in KINDS_BY_STEP.values() for kind in kinds} | {SUB_AGENT_KIND}


def _prompts(was: _Placed, now: _Placed, before: _Definition, after: _Definition) -> list[FieldChange]:
    """The template of each prompt kind either side has for the step: its file, else the
    built-in one the runtime falls back to (so a built-in written out is no change)."""
    kinds: list[str] = []
    for placed, definition in ((now, after), (was, before)):
        step_id = placed.step.id
        used = KINDS_BY_STEP[placed.step.type] if placed.top else (SUB_AGENT_KIND,)
        given = sorted(kind for owner, kind in definition.prompts if owner == step_id)
        kinds += [kind for kind in (*used, *given) if kind not in kinds]

    def text(definition: _Definition, step_id: str) -> dict[str, str | None]:
        return {kind: definition.prompts.get((step_id, kind), _builtin(kind)) for kind in kinds}

    return _changes(text(before, was.step.id), text(after, now.step.id))


def _builtin(kind: str) -> str | None:
    return default_template(kind) if kind in _TEMPLATES else None


# -- checklists, by position -------------------------------------------------------------


def _key(task: PlanTask) -> tuple[str, str]:
    """What a confirmation confirmed: the task's action and expected result."""
    return task.action, task.expected_result


def _task(task: PlanTask) -> dict[str, Any]:
    return {
        "action": task.action,
        "expected_result": task.expected_result,
        "constraints": task.constraints or None,
        "label": task.label,
        "after": task.after or None,
    }


def _checklist(
    old: list[PlanTask] | None, new: list[PlanTask] | None, composed: bool
) -> ChecklistChange | None:
    """The checklists compared by position (`composed`: OLD's runs composed their own at
    intake, so none of their confirmations holds under a ready checklist)."""
    a, b = old or [], new or []
    if (old is None) == (new is None) and [_task(t) for t in a] == [_task(t) for t in b]:
        return None
    matcher = SequenceMatcher(None, [_key(t) for t in a], [_key(t) for t in b], autojunk=False)
    now_at: dict[int, int] = {}  # OLD index -> NEW index of the same task (reworded in a replace)
    shifted = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            for k in range(min(i2 - i1, j2 - j1)):
                now_at[i1 + k] = j1 + k
                if tag == "equal" and i1 != j1:
                    shifted.append(TaskMove(old=i1 + k + 1, new=j1 + k + 1))
    was_at = {j: i for i, j in now_at.items()}
    positions = list(_positions(a, b, now_at, was_at, composed))
    affected = [p.position for p in positions if p.affects_confirmed]
    return ChecklistChange(
        old_total=None if old is None else len(a),
        new_total=None if new is None else len(b),
        inserted=[j + 1 for j in range(len(b)) if j not in was_at],
        removed=[i + 1 for i in range(len(a)) if i not in now_at],
        shifted=shifted,
        first_affected=min(affected) if affected else None,
        positions=positions,
    )


def _positions(
    a: list[PlanTask], b: list[PlanTask], now_at: Mapping[int, int], was_at: Mapping[int, int], composed: bool
) -> Iterator[TaskChange]:
    for index in range(max(len(a), len(b))):
        old = a[index] if index < len(a) else None
        new = b[index] if index < len(b) else None
        if old is not None and new is not None and _task(old) == _task(new):
            continue
        fields = None
        if old is not None and new is not None:
            fields = [f for f in TASK_FIELDS if _task(old)[f] != _task(new)[f]]
        came, went = was_at.get(index), now_at.get(index)
        yield TaskChange(
            position=index + 1,
            change="added" if old is None else "removed" if new is None else "changed",
            fields=fields,
            old=old,
            new=new,
            was_at=None if new is None or came is None or came == index else came + 1,
            now_at=None if old is None or went is None or went == index else went + 1,
            # a run under OLD confirmed its agent's own checklist, or OLD's task here
            affects_confirmed=(composed and new is not None)
            or (old is not None and (new is None or _key(old) != _key(new))),
        )


# -- as text -------------------------------------------------------------------------------


def text(diff: Diff) -> str:
    """The diff for people: nothing when the two are equivalent (but the runs, if asked)."""
    runs = "" if diff.runs is None else _runs_text(diff.runs)
    if diff.equivalent:
        return runs
    return _changes_text(diff) + (f"\n{runs}" if runs else "")


def _changes_text(diff: Diff) -> str:
    lines = [_heading("OLD", diff.old), _heading("NEW", diff.new), ""]
    for change in diff.workflow or []:
        lines.append(f"~ workflow {change.field}: {_value(change.old)} -> {_value(change.new)}")
    if diff.workflow:
        lines.append("")
    for step in diff.steps:
        lines += [*_step_lines(step), ""]
    lines.append(_summary(diff))
    return "\n".join(lines) + "\n"


def _heading(name: str, side: DiffSide) -> str:
    what = f"workflow `{side.workflow_id}`" if side.workflow_id else "a plan"
    return f"{name} {side.path}: {what}, source_sha256 {side.source_sha256[:12]}…"


MARK = {"added": "+", "removed": "-", "changed": "~"}


def _step_lines(step: StepChange) -> list[str]:
    title = json.dumps(step.title, ensure_ascii=False)
    lines = [f"{MARK[step.change]} step `{step.step}` ({step.kind} {title}, {step.place})"]
    if step.moved is not None:
        lines.append(f"    moved: {step.moved.old} -> {step.moved.new}")
    shown = [f for f in step.fields or [] if step.change == "changed" or f.field not in ("kind", "title")]
    lines += [f"    {line}" for line in _field_lines(shown, step.change)]
    for route in step.routes or []:
        lines.append(f"    {MARK[route.change]} route `{route.route}`")
        lines += [f"        {line}" for line in _field_lines(route.fields or [], route.change)]
    for prompt in step.prompts or []:
        lines.append(f"    prompt {prompt.field}:")
        lines += [f"        {line}" for line in _text_diff(prompt.old, prompt.new)]
    if step.tasks is not None:
        lines += [f"    {line}" for line in _checklist_lines(step.tasks, step.change == "changed")]
    return lines


def _field_lines(fields: Iterable[FieldChange], change: str) -> Iterator[str]:
    for field in fields:
        if change == "added":
            yield f"{field.field}: {_value(field.new)}"
        elif change == "removed":
            yield f"{field.field}: {_value(field.old)}"
        else:
            yield f"{field.field}: {_value(field.old)} -> {_value(field.new)}"


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "(none)"
    return json.dumps(value, ensure_ascii=False)


def _text_diff(old: str | None, new: str | None) -> list[str]:
    lines = unified_diff((old or "").splitlines(), (new or "").splitlines(), "OLD", "NEW", lineterm="", n=1)
    return list(lines)


def _checklist_lines(tasks: ChecklistChange, runs: bool) -> list[str]:
    total = _total(tasks.old_total)
    if tasks.new_total != tasks.old_total:
        total += f" -> {_total(tasks.new_total)}"
    lines = [f"tasks: {total} (position is a task's identity)"]
    if tasks.old_total is not None and tasks.new_total is not None:
        for what, positions in (("inserted at", tasks.inserted), ("removed from", tasks.removed)):
            if positions:
                lines.append(f"  {_count(len(positions))} {what} {', '.join(map(str, positions))}")
    if tasks.shifted:
        moves = ", ".join(f"{m.old} -> {m.new}" for m in tasks.shifted)
        lines.append(f"  unchanged tasks at another position, each another identity now: {moves}")
    for change in tasks.positions:
        lines += [f"  {line}" for line in _position_lines(change, tasks)]
    if runs and tasks.first_affected is not None:
        lines.append(
            f"  ! a run of OLD past task {tasks.first_affected} confirmed, at a position marked !, "
            "a task NEW words otherwise or does not have"
        )
    return lines


def _total(total: int | None) -> str:
    return "composed at intake" if total is None else str(total)


def _count(count: int) -> str:
    return f"{count} task{'s' if count != 1 else ''}"


def _position_lines(change: TaskChange, tasks: ChecklistChange) -> list[str]:
    """A position's task in OLD (`-`) and in NEW (`+`), with where each went or came from;
    `!` marks a position whose confirmations NEW does not keep."""
    lines = []
    number = f"{'!' if change.affects_confirmed else ' '} {change.position}."
    pad = " " * len(number)
    inserted, removed = change.position in tasks.inserted, change.position in tasks.removed
    if change.old is not None:
        note = f"now {change.now_at}" if change.now_at else "removed" if removed else ""
        lines.append(f"{number} - {_task_text(change.old)}{_note(note)}")
    if change.new is not None:
        note = f"was {change.was_at}" if change.was_at else "inserted" if inserted else ""
        if not note and change.fields:
            note = f"{', '.join(change.fields)} changed"
        lead = pad if change.old is not None else number
        lines.append(f"{lead} + {_task_text(change.new)}{_note(note)}")
    return lines


def _note(note: str) -> str:
    return f"  ({note})" if note else ""


def _task_text(task: PlanTask) -> str:
    text = f"{task.label}: " if task.label else ""
    text += f"{_value(task.action)} => {_value(task.expected_result)}"
    if task.after:
        text += f" after {', '.join(task.after)}"
    if task.constraints:
        text += f" [constraints: {_value(task.constraints)}]"
    return text


def _summary(diff: Diff) -> str:
    counts = {kind: sum(s.change == kind for s in diff.steps) for kind in ("changed", "added", "removed")}
    parts = [f"{n} step{'s' if n != 1 else ''} {kind}" for kind, n in counts.items() if n]
    if diff.workflow:
        parts.insert(0, "the workflow's " + " and ".join(c.field for c in diff.workflow))
    return "NEW differs from OLD: " + ", ".join(parts)


def _runs_text(runs: list[DiffRun]) -> str:
    """Each run of OLD: its state now, and NEW's verdict on its journal (`todoflow replay`)."""
    lines = [f"runs of OLD: {len(runs) or 'none'}"]
    width = max((len(run.process_id) for run in runs), default=0)
    for run in runs:
        lines.append(f"  {run.process_id:<{width}}  {run.status:<8}  {_run_verdict(run)}")
    return "\n".join(lines) + "\n"


OUTCOMES = {"refused": "refused", "unreachable": "no longer reachable"}


def _run_verdict(run: DiffRun) -> str:
    if run.verdict is None:
        return run.error or ""
    if run.first is None:
        return run.verdict
    first = run.first
    said = f"{OUTCOMES[first.outcome]}: {first.reason}" if first.reason else OUTCOMES[first.outcome]
    return f"{run.verdict} from entry {run.from_entry} ({first.type} of step `{first.step}` {said})"
