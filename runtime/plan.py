"""The plan a run walks: plan.json (+ step_config.json, prompt templates) as runtime steps.

Loaded from files, never from the AST, so a plan.json made elsewhere runs too; a
missing prompt template falls back to the built-in default. Templates are read when a
directive first renders them, not when the plan is loaded: opening a run to look at it
reads plan.json alone. Ready checklists passed in by a caller (`--tasks`, MCP `start
prepare`) are validated and ordered here.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from todoflow.compiler import formats
from todoflow.compiler.checklist import MAX_TASKS, MAX_TEXT
from todoflow.compiler.ordering import order_tasks
from todoflow.compiler.prompt_files import prompt_of
from todoflow.compiler.prompts import KINDS_BY_STEP, TEMPLATES
from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node, replace


class PlanError(TodoflowError):
    """A plan or a ready checklist that cannot be run, with the reason."""


@node
class Task:
    """One checklist item as the engine sees it: its position in the list is its identity."""

    action: str
    expected_result: str
    constraints: tuple[str, ...] = ()
    priority: str = "medium"  # high, medium or low: display only (the seed's todos.json)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "expected_result": self.expected_result}
        if self.constraints:
            out["constraints"] = list(self.constraints)
        if self.priority != "medium":
            out["priority"] = self.priority
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """The task `as_dict` wrote (a journal entry, a snapshot, a ready_tasks.json)."""
        constraints = tuple(data.get("constraints", ()))
        return cls(data["action"], data["expected_result"], constraints, data.get("priority", "medium"))


@node
class Llm:
    provider: str
    model_id: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.model_id}"


@node
class AgentConfigs:
    """A step's step_config.json entry, as the runtime uses it."""

    execution_max_turns: int | None = None
    execution_llm: Llm | None = None
    conditional_llm: Llm | None = None
    declared_execution_mode: str | None = None


@node
class SubStep:
    """The step behind a route: what its sub-agent is told, and what prevalidation checks."""

    id: str
    title: str
    description: str | None
    success_criteria: str | None
    context_dependencies: tuple[str, ...]
    context_output: str | None
    expected_files: tuple[str, ...]  # the validation_schema's files that must exist
    configs: AgentConfigs
    template: Template  # its `sub_agent` prompt


@node
class Route:
    id: str
    name: str
    condition: str
    step_id: str
    step: SubStep


@node
class Template:
    """A prompt template: its text given, or a file read when it is first rendered."""

    name: str  # where it came from, for error messages: `prompts/ship/work.j2` or `built-in work`
    path: Path | None = None
    inline: str = ""

    @property
    def text(self) -> str:
        return self.inline if self.path is None else _read_template(self.path)


@lru_cache(maxsize=512)  # bounded: a long-running server opens many runs' plans
def _read_template(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PlanError(f"cannot read the prompt template {path.name}: {error}") from None


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
    configs: AgentConfigs = AgentConfigs()

    def template(self, kind: str) -> Template:
        return dict(self.templates)[kind]

    def route(self, route_id: str) -> Route | None:
        return next((r for r in self.routes if r.id == route_id), None)


@node
class RunPlan:
    """The steps of a run. Build it with `RunPlan.of`, which indexes the steps by id (the
    engine looks steps up several times a step); the index lives and dies with the plan."""

    workflow_id: str
    title: str
    steps: tuple[RunStep, ...]
    source_sha256: str | None
    by_id: Mapping[str, RunStep] = field(compare=False)

    @classmethod
    def of(
        cls, workflow_id: str, title: str, steps: tuple[RunStep, ...], source_sha256: str | None
    ) -> RunPlan:
        return cls(workflow_id, title, steps, source_sha256, {s.id: s for s in steps})

    def step(self, step_id: str) -> RunStep:
        return self.by_id[step_id]

    @property
    def first_checklist_step(self) -> RunStep | None:
        """The step a caller's ready checklist (or goal) goes to: the first todo_task step."""
        return next((s for s in self.steps if s.kind == "todo_task"), None)

    def with_steps(self, steps: tuple[RunStep, ...]) -> RunPlan:
        return RunPlan.of(self.workflow_id, self.title, steps, self.source_sha256)


Templates = Mapping[tuple[str, str], Template]  # (step id, kind) -> the step's own template


Configs = Mapping[str, AgentConfigs]  # step id -> its step_config.json entry


def load_plan(folder: Path, workflow_id: str, title: str) -> RunPlan:
    """The plan stored in a folder: plan.json, step_config.json and
    prompts/<step>/<kind>.j2 when present."""
    try:
        plan = formats.Plan.model_validate_json((folder / "plan.json").read_bytes())
        config_file = folder / "step_config.json"
        config = (
            formats.StepConfig.model_validate_json(config_file.read_bytes()) if config_file.exists() else None
        )
    except (OSError, ValueError, ValidationError) as error:
        raise PlanError(f"cannot read the plan in {folder}: {_first_line(error)}") from error
    return from_plan(plan, workflow_id, title, _template_files(folder / "prompts"), configs_of(config))


def plan_from_files(files: Mapping[str, str], workflow_id: str, title: str) -> RunPlan:
    """The plan stored with a run as files by their path: plan.json, step_config.json and
    prompts/ (a store that keeps no folder keeps these)."""
    try:
        plan = formats.Plan.model_validate_json(files["plan.json"])
        config = (
            formats.StepConfig.model_validate_json(files["step_config.json"])
            if "step_config.json" in files
            else None
        )
    except (KeyError, ValueError) as error:
        raise PlanError(f"the stored plan of `{workflow_id}` cannot be read ({_first_line(error)})") from None
    return from_plan(plan, workflow_id, title, templates_of(files), configs_of(config))


PLANS_KEPT = 8  # plans a process keeps built after their runs close: few, so memory stays bounded
_PLANS: OrderedDict[Hashable, RunPlan] = OrderedDict()
_PLANS_LOCK = threading.Lock()


def files_sha256(files: Mapping[str, str]) -> str:
    """The sha256 of a run's stored plan files (their paths and texts): what a run records
    in its meta, so that opening it finds the plan already built for the same files."""
    digest = hashlib.sha256()
    for path, text in sorted(files.items()):
        digest.update(f"{len(path)}:{path}:{len(text)}:".encode())
        digest.update(text.encode())
    return digest.hexdigest()


def kept_plan(key: Hashable | None, build: Callable[[], RunPlan]) -> RunPlan:
    """The plan `build()` makes, built once per process for `key` (the stored files'
    sha256 with what else the plan is made of; None: built every time). A plan is
    immutable, so every run opened with the same key shares it; the least recently
    opened are let go past `PLANS_KEPT` (a server keeps the runs it serves open, and
    each holds its plan)."""
    if key is None:
        return build()
    with _PLANS_LOCK:
        found = _PLANS.get(key)
        if found is not None:
            _PLANS.move_to_end(key)
            return found
    plan = build()
    with _PLANS_LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > PLANS_KEPT:
            _PLANS.popitem(last=False)
    return plan


def run_plan(plan: RunPlan, goal: str | None, ready: str | None, max_turns: int | None = None) -> RunPlan:
    """The plan a run walks: its stored plan, the caller's goal (the objective of the first
    todo_task step), ready checklists (`ready`: the text of plan/ready_tasks.json) and the
    caller's bound on orchestrator turns (`run --max-turns`: every todo_task step's)."""
    if max_turns is not None:
        plan = plan.with_steps(
            tuple(
                replace(s, configs=replace(s.configs, execution_max_turns=max_turns))
                if s.kind == "todo_task"
                else s
                for s in plan.steps
            )
        )
    first = plan.first_checklist_step
    if goal and first is not None:
        plan = plan.with_steps(tuple(replace(s, description=goal) if s is first else s for s in plan.steps))
    if ready is not None:
        data = json.loads(ready)
        plan = with_ready_tasks(
            plan, {step: tuple(Task.from_dict(t) for t in tasks) for step, tasks in data.items()}
        )
    return plan


def configs_of(config: formats.StepConfig | None) -> dict[str, AgentConfigs]:
    """step_config.json's entries by step id."""

    def llm(choice: formats.LlmConfig | None) -> Llm | None:
        return None if choice is None else Llm(choice.provider, choice.model_id)

    return {
        entry.id: AgentConfigs(
            entry.agent_configs.execution_max_turns,
            llm(entry.agent_configs.execution_llm),
            llm(entry.agent_configs.conditional_llm),
            entry.declared_execution_mode,
        )
        for entry in (config.steps if config is not None else [])
    }


def _template_files(prompts: Path) -> Templates:
    """The template files of a plan folder, listed (not read)."""
    try:
        steps = [entry for entry in os.scandir(prompts) if entry.is_dir()]
    except OSError:
        return {}
    found = {}
    for step in steps:
        for entry in os.scandir(step.path):
            if entry.name.endswith(".j2"):
                kind = entry.name.removesuffix(".j2")
                found[(step.name, kind)] = Template(f"prompts/{step.name}/{entry.name}", Path(entry.path))
    return found


def templates_of(files: Mapping[str, str]) -> Templates:
    """The templates among a definition's files (`prompts/<step>/<kind>.j2` -> text)."""
    found = {}
    for relative, text in files.items():
        owner = prompt_of(relative)
        if owner is not None:
            found[owner] = Template(relative, None, text)
    return found


def from_plan(
    plan: formats.Plan, workflow_id: str, title: str, templates: Templates, configs: Configs | None = None
) -> RunPlan:
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
        steps.append(_run_step(index, step, next_step_id, templates, configs or {}))
    return RunPlan.of(workflow_id, title, tuple(steps), plan.source_sha256)


def _expected(step: formats.PlanStep) -> tuple[str, ...]:
    files = step.validation_schema.files if step.validation_schema else []
    return tuple(f.file_name for f in files if f.must_exist)


def _sub_step(step: formats.PlanStep, templates: Templates, configs: Configs) -> SubStep:
    return SubStep(
        step.id,
        step.title,
        step.description,
        step.success_criteria,
        tuple(step.context_dependencies or ()),
        step.context_output,
        _expected(step),
        configs.get(step.id, AgentConfigs()),
        _template(templates, step.id, "sub_agent"),
    )


def _run_step(
    index: int, step: formats.PlanStep, next_step_id: str, templates: Templates, configs: Configs
) -> RunStep:
    routes = tuple(
        Route(
            r.route_id,
            r.route_name,
            r.condition,
            r.sub_agent_step.id,
            _sub_step(r.sub_agent_step, templates, configs),
        )
        for r in step.predefined_routes or []
    )
    ready = None
    if step.tasks:
        ready = tuple(Task(t.action, t.expected_result, tuple(t.constraints or ())) for t in step.tasks)
    own = tuple((kind, _template(templates, step.id, kind)) for kind in KINDS_BY_STEP[step.type])
    return RunStep(
        index,
        step.id,
        step.type,
        step.title,
        step.description,
        step.success_criteria,
        tuple(step.context_dependencies or ()),
        step.context_output,
        _expected(step),
        next_step_id,
        routes,
        step.generic_agent is not False,
        ready,
        own,
        configs.get(step.id, AgentConfigs()),
    )


def _template(templates: Templates, step_id: str, kind: str) -> Template:
    found = templates.get((step_id, kind))
    return found if found is not None else Template(f"built-in {kind}", TEMPLATES / f"{kind}.j2")


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
    return plan.with_steps(tuple(steps))


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
    for name in ("action", "expected_result"):
        problem = text_problem(item.get(name), name, MAX_TEXT)
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
