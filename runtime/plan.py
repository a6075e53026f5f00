"""The plan a run walks: plan.json (+ step_config.json, prompt templates) as runtime steps.

Loaded from files, never from the AST, so a plan.json made elsewhere runs too; a
missing prompt template falls back to the built-in default. Ready checklists passed
in by a caller (`--tasks`, MCP `start prepare`) are validated and ordered here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from todoflow.compiler import formats
from todoflow.compiler.checklist import MAX_TASKS, MAX_TEXT
from todoflow.compiler.ordering import order_tasks
from todoflow.compiler.prompts import KINDS_BY_STEP, default_template
from todoflow.dsl.diagnostics import Diagnostic, TodoflowError
from todoflow.dsl.nodes import node, replace


class PlanError(TodoflowError):
    """A plan or a ready checklist that cannot be run, with the reason."""


@node
class Task:
    """One checklist item as the engine sees it: its position in the list is its identity."""

    action: str
    expected_result: str
    constraints: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "expected_result": self.expected_result}
        if self.constraints:
            out["constraints"] = list(self.constraints)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """The task `as_dict` wrote (a journal entry, a snapshot, a ready_tasks.json)."""
        return cls(data["action"], data["expected_result"], tuple(data.get("constraints", ())))


@node
class Route:
    id: str
    name: str
    condition: str
    step_id: str


@node
class Template:
    name: str  # where it came from, for error messages: `prompts/ship/work.j2` or `built-in work`
    text: str


@node
class RunStep:
    index: int
    id: str
    kind: str
    title: str
    description: str | None
    success_criteria: str | None
    context_dependencies: tuple[str, ...]
    context_output: str | None
    expected_files: tuple[str, ...]
    next_step_id: str
    routes: tuple[Route, ...]
    generic_agent: bool
    ready_tasks: tuple[Task, ...] | None  # None: the agent composes the list at intake
    templates: tuple[tuple[str, Template], ...]

    def template(self, kind: str) -> Template:
        return dict(self.templates)[kind]


@node
class RunPlan:
    workflow_id: str
    title: str
    steps: tuple[RunStep, ...]
    source_sha256: str | None

    def step(self, step_id: str) -> RunStep:
        index = _INDEX.get(id(self))
        if index is None or index[0] is not self:
            index = _INDEX[id(self)] = (self, {s.id: s for s in self.steps})
        return index[1][step_id]


# step id -> step, per plan: the engine looks steps up several times a step
_INDEX: dict[int, tuple[RunPlan, dict[str, RunStep]]] = {}


def load_plan(folder: Path, workflow_id: str, title: str) -> RunPlan:
    """The plan stored in a folder: plan.json, and prompts/<step>/<kind>.j2 when present."""
    try:
        data = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
        plan = formats.Plan.model_validate(data)
    except (OSError, ValueError, ValidationError) as error:
        raise PlanError(f"cannot read {folder / 'plan.json'}: {_first_line(error)}") from error
    return from_plan(plan, workflow_id, title, folder / "prompts")


def from_plan(plan: formats.Plan, workflow_id: str, title: str, prompts: Path | None) -> RunPlan:
    ids = [step.id for step in plan.steps]
    if not ids:
        raise PlanError("the plan has no steps")
    steps = []
    for index, step in enumerate(plan.steps):
        following = ids[index + 1] if index + 1 < len(ids) else "end"
        next_step_id = step.next_step_id or following
        if next_step_id != "end" and next_step_id not in ids:
            raise PlanError(
                f"step `{step.id}` continues with `{next_step_id}`, which is not a step of the plan"
            )
        steps.append(_run_step(index, step, next_step_id, prompts))
    return RunPlan(workflow_id, title, tuple(steps), plan.source_sha256)


def _run_step(index: int, step: formats.PlanStep, next_step_id: str, prompts: Path | None) -> RunStep:
    files = step.validation_schema.files if step.validation_schema else []
    routes = tuple(
        Route(r.route_id, r.route_name, r.condition, r.sub_agent_step.id)
        for r in step.predefined_routes or []
    )
    ready = None
    if step.tasks:
        ready = tuple(Task(t.action, t.expected_result, tuple(t.constraints or ())) for t in step.tasks)
    templates = tuple((kind, _template(prompts, step.id, kind)) for kind in KINDS_BY_STEP[step.type])
    return RunStep(
        index,
        step.id,
        step.type,
        step.title,
        step.description,
        step.success_criteria,
        tuple(step.context_dependencies or ()),
        step.context_output,
        tuple(f.file_name for f in files if f.must_exist),
        next_step_id,
        routes,
        step.generic_agent is not False,
        ready,
        templates,
    )


def _template(prompts: Path | None, step_id: str, kind: str) -> Template:
    if prompts is not None:
        file = prompts / step_id / f"{kind}.j2"
        if file.is_file():
            return Template(f"prompts/{step_id}/{kind}.j2", file.read_text(encoding="utf-8"))
    return Template(f"built-in {kind}", default_template(kind))


def with_ready_tasks(plan: RunPlan, ready: Mapping[str, tuple[Task, ...]]) -> RunPlan:
    """The plan with caller-supplied ready checklists for the named todo_task steps."""
    steps = []
    for step in plan.steps:
        if step.id in ready:
            if step.kind != "todo_task":
                raise PlanError(
                    f"step `{step.id}` is a `{step.kind}` step; only a todo_task step takes a checklist"
                )
            step = replace(step, ready_tasks=ready[step.id])
        steps.append(step)
    unknown = sorted(set(ready) - {s.id for s in plan.steps})
    if unknown:
        raise PlanError(f"the plan has no step `{unknown[0]}` to take a checklist")
    return RunPlan(plan.workflow_id, plan.title, tuple(steps), plan.source_sha256)


def parse_ready_tasks(data: Any, where: str) -> tuple[tuple[Task, ...], list[str]]:
    """A caller's ready checklist -> tasks in dependency order, and a note per moved task.

    Items are `{action, expected_result, constraints?, label?, after?}`; `after` names
    labels of the same list. The wording is kept; a cycle is refused naming its tasks.
    """
    if not isinstance(data, list):
        raise PlanError(f"{where}: a checklist is a list of tasks")
    if not 1 <= len(data) <= MAX_TASKS:
        raise PlanError(f"{where}: a checklist holds 1 to {MAX_TASKS} tasks, not {len(data)}")
    items = [_ready_item(item, f"{where}[{i}]") for i, item in enumerate(data)]
    labels = {label: i for i, (_, label, _) in enumerate(items) if label}
    needs = []
    for i, (_, _, after) in enumerate(items):
        for name in after:
            if name not in labels:
                raise PlanError(f"{where}[{i}].after: no task is labelled `{name}`")
        needs.append([labels[name] for name in after])
    ordering = order_tasks(needs)
    if ordering.cycles:
        names = " and ".join(_name(items, i) for i in ordering.cycles[0])
        raise PlanError(f"{where}: {names} need each other's result; no order satisfies both")
    notes = [
        f"{_name(items, m.task)} moved after {_name(items, m.because)}: it needs {_name(items, m.because)}"
        for m in ordering.moves
    ]
    return tuple(items[i][0] for i in ordering.order), notes


def _ready_item(item: Any, where: str) -> tuple[Task, str | None, list[str]]:
    if not isinstance(item, dict):
        raise PlanError(f"{where}: a task is an object with `action` and `expected_result`")
    unknown = sorted(set(item) - {"action", "expected_result", "constraints", "label", "after"})
    if unknown:
        raise PlanError(f"{where}: unknown field `{unknown[0]}`")
    for field in ("action", "expected_result"):
        problem = text_problem(item.get(field), field, MAX_TEXT)
        if problem:
            raise PlanError(f"{where}.{problem}")
    constraints = item.get("constraints", [])
    after = item.get("after", [])
    label = item.get("label")
    if not (isinstance(constraints, list) and all(isinstance(c, str) and c.strip() for c in constraints)):
        raise PlanError(f"{where}.constraints: a list of non-empty strings")
    if not (isinstance(after, list) and all(isinstance(a, str) for a in after)):
        raise PlanError(f"{where}.after: a list of task labels")
    if label is not None and not isinstance(label, str):
        raise PlanError(f"{where}.label: a string")
    return Task(item["action"], item["expected_result"], tuple(constraints)), label, after


def text_problem(value: Any, field: str, limit: int) -> str | None:
    """Why a required text field is not acceptable ("evidence is 612 characters; at most 500")."""
    if not isinstance(value, str):
        return f"{field} is missing" if value is None else f"{field} must be a string"
    if not value.strip():
        return f"{field} is empty"
    if len(value) > limit:
        return f"{field} is {len(value):,} characters; at most {limit:,}"
    return None


def _name(items: list[tuple[Task, str | None, list[str]]], index: int) -> str:
    label = items[index][1]
    return f"task `{label}`" if label else f"task {index + 1}"


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@node
class PlanFiles:
    """A plan made elsewhere, as a run stores it: plan.json (flat), step_config.json, prompts."""

    workflow_id: str
    title: str
    files: tuple[tuple[str, str], ...]
    source: str  # the plan.json read
    source_sha256: str


def load_plan_files(path: Path) -> tuple[PlanFiles | None, list[Diagnostic]]:
    """plan.json (or a folder holding one), legacy nested steps flattened, beside it
    step_config.json and prompts/ if present; or the diagnostics that forbid running it."""
    import re

    from todoflow.compiler.planfile import read_plan, read_step_config
    from todoflow.dsl.parser import normalize, source_sha256

    file = path / "plan.json" if path.is_dir() else path
    text = normalize(file.read_text(encoding="utf-8"))
    read = read_plan(text, str(file))
    found = list(read.diagnostics)
    files = {}
    if read.plan is not None:
        files["plan.json"] = read.plan.to_json()
    config = file.with_name("step_config.json")
    if config.is_file():
        parsed, problems = read_step_config(config.read_text(encoding="utf-8"), str(config))
        found += problems
        if parsed is not None:
            files["step_config.json"] = parsed.to_json()
    prompts = file.with_name("prompts")
    for template in sorted(prompts.glob("*/*.j2")) if prompts.is_dir() else []:
        files[f"prompts/{template.parent.name}/{template.name}"] = template.read_text(encoding="utf-8")
    if read.plan is None or any(d.is_error for d in found):
        return None, found
    name = re.sub(r"[^a-z0-9_-]+", "-", file.resolve().parent.name.lower()).strip("-_") or "plan"
    workflow_id = name if name[0].isalpha() else f"plan-{name}"
    digest = source_sha256(text)
    definition = PlanFiles(
        workflow_id,
        f"{file.parent.name or workflow_id}/plan.json",
        tuple(sorted(files.items())),
        str(file.resolve()),
        digest,
    )
    return definition, found
