"""The file formats of the TodoTaskPlanStep platform, as pydantic models.

plan.json (the flat format, with our `tasks` and `generic_agent` extensions),
step_config.json and todos.json (seeds/todo-task-plan-step.md), and what `todoflow diff`,
`todoflow replay` and `todoflow plan` print with `--format json`. The same models write
the files and give their JSON Schemas (`todoflow schema`), so an emitted file always
validates against the published schema. Optional fields are omitted when empty, never
written as null.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_json(self) -> str:
        """Deterministic JSON: keys in the format's order, 2-space indent, no nulls."""
        return self.model_dump_json(indent=2, exclude_none=True) + "\n"


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def plan_json(steps: Iterable[PlanStep], source_sha256: str) -> str:
    """`Plan(steps=..., source_sha256=...).to_json()`, built one step at a time.

    The same bytes, without holding the model objects of every step at once: a plan
    of 10,000 tasks would otherwise cost several times its own size in memory."""
    parts = ['{\n  "steps": [']
    for index, step in enumerate(steps):
        text = step.model_dump_json(indent=2, exclude_none=True)
        parts.append(("\n" if index == 0 else ",\n") + "    " + text.replace("\n", "\n    "))
    parts.append("\n  ]" if len(parts) > 1 else "]")
    parts.append(f',\n  "source_sha256": {json.dumps(source_sha256)}\n}}\n')
    return "".join(parts)


class FileCheck(_Model):
    file_name: str
    must_exist: bool = True


class ValidationSchema(_Model):
    files: list[FileCheck]


class PlanTask(_Model):
    """A ready checklist item (extension): position in the list is its identity. `label`
    and `after` are the source's, kept so the plan says why the order is what it is
    (the list is already in that order; the runtime reads neither)."""

    action: str = Field(min_length=1, max_length=1000)
    expected_result: str = Field(min_length=1, max_length=1000)
    constraints: list[str] | None = None
    label: str | None = Field(default=None, description="the task's label in the source")
    after: list[str] | None = Field(default=None, description="labels of the tasks it comes after")


class PredefinedRoute(_Model):
    route_id: str
    route_name: str
    condition: str
    sub_agent_step: PlanStep


class PlanStep(_Model):
    type: Literal["regular", "todo_task"]
    id: str
    title: str
    description: str | None = None
    success_criteria: str | None = None
    context_dependencies: list[str] | None = None
    context_output: str | None = None
    validation_schema: ValidationSchema | None = None
    predefined_routes: list[PredefinedRoute] | None = None
    tasks: list[PlanTask] | None = Field(default=None, min_length=1, max_length=100)
    generic_agent: Literal[False] | None = Field(
        default=None, description="present, and false, only when the generic sub-agent is off"
    )
    next_step_id: str | None = Field(default=None, description="absent on a sub-agent step inside a route")


class Plan(_Model):
    """plan.json: the steps in run order of the source."""

    steps: list[PlanStep]
    source_sha256: str | None = Field(default=None, description="sha256 of the .todoflow source")


class LlmConfig(_Model):
    provider: str
    model_id: str


class AgentConfigsModel(_Model):
    execution_max_turns: int | None = Field(default=None, ge=1, le=2**31 - 1)
    execution_llm: LlmConfig | None = None
    conditional_llm: LlmConfig | None = None


class StepConfigEntry(_Model):
    id: str
    declared_execution_mode: Literal["learn_code"] | None = None
    agent_configs: AgentConfigsModel


class StepConfig(_Model):
    """step_config.json: one entry per step (sub-agents included) with any setting."""

    steps: list[StepConfigEntry]
    source_sha256: str | None = None


TodoStatus = Literal["pending", "in_progress", "completed", "blocked"]
# RFC 3339 date-time: the `pattern` makes every validator check it, where `format` is
# only an annotation unless a validator is told to check formats.
_DATE_TIME = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)"
    r"(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
Timestamp = Annotated[
    str,
    Field(pattern=_DATE_TIME, json_schema_extra={"format": "date-time"}, examples=["2024-01-25T10:00:00Z"]),
]


class TodoItem(_Model):
    id: str
    title: str
    description: str | None = None
    priority: Literal["high", "medium", "low"] | None = None
    status: TodoStatus
    assigned_agent: str | None = Field(default=None, description="the route id, or `generic`, once delegated")
    result: str | None = None
    notes: str | None = Field(default=None, description="what update_todo said last (extension)")
    created_at: Timestamp
    updated_at: Timestamp


class TodoSummary(_Model):
    total: int
    completed: int
    in_progress: int
    open: int


class Todos(_Model):
    """todos.json of one todo_task step's execution."""

    step_id: str
    objective: str
    todos: list[TodoItem]
    summary: TodoSummary


class DiffSide(_Model):
    """One side of `todoflow diff`: what was read, and the hash a run records of it."""

    path: str = Field(description="the file or folder as given")
    workflow_id: str | None = Field(
        default=None, description="absent for a plan.json, which names no workflow"
    )
    title: str | None = None
    source_sha256: str = Field(description="what a run started from it records as its source_sha256")


class FieldChange(_Model):
    """A field whose value differs; `old` or `new` is absent where the field is not set."""

    field: str
    old: Any = None
    new: Any = None


class TaskChange(_Model):
    """A position whose task differs: position is a task's identity."""

    position: int = Field(ge=1)
    change: Literal["added", "removed", "changed"]
    fields: list[str] | None = Field(default=None, description="changed: which of the task's fields differ")
    old: PlanTask | None = None
    new: PlanTask | None = None
    was_at: int | None = Field(default=None, description="the task now here held this position in OLD")
    now_at: int | None = Field(default=None, description="the task that was here holds this position in NEW")
    affects_confirmed: bool = Field(
        description="a run that confirmed this position under OLD confirmed a task NEW words otherwise "
        "(its action or expected result differs, or it is gone), or a checklist its agent composed "
        "where NEW has a ready one"
    )


class TaskMove(_Model):
    old: int = Field(ge=1)
    new: int = Field(ge=1)


class ChecklistChange(_Model):
    """A ready checklist compared position by position."""

    old_total: int | None = Field(
        default=None, description="absent: the agent composes the checklist at intake"
    )
    new_total: int | None = None
    inserted: list[int] = Field(description="NEW's positions of tasks OLD does not have")
    removed: list[int] = Field(description="OLD's positions of tasks NEW does not have")
    shifted: list[TaskMove] = Field(description="tasks found unchanged at another position")
    first_affected: int | None = Field(
        default=None,
        description="the first position whose confirmation NEW does not keep; a run that confirmed "
        "fewer tasks keeps every confirmation",
    )
    positions: list[TaskChange]


class RouteChange(_Model):
    route: str
    change: Literal["added", "removed", "changed"]
    fields: list[FieldChange] | None = Field(default=None, description="name, condition, step")


class StepChange(_Model):
    step: str
    change: Literal["added", "removed", "changed"]
    kind: Literal["regular", "todo_task"]
    title: str
    place: str = Field(description="where the step is: NEW's place, OLD's for a removed step")
    moved: FieldChange | None = Field(default=None, description="`place`: where it was and where it is")
    fields: list[FieldChange] | None = None
    routes: list[RouteChange] | None = None
    prompts: list[FieldChange] | None = Field(
        default=None, description="per prompt kind, the template's text (a built-in one where none is given)"
    )
    tasks: ChecklistChange | None = None


class ReplayEntry(_Model):
    """One entry of a run's journal, offered to NEW's engine where the run made it."""

    seq: int = Field(ge=1, description="its place in the run's journal")
    type: str = Field(description="the entry's kind, as the journal names it: `confirm`, `submit_tasks`, …")
    step: str
    by: str = Field(description="who made it: `agent`, `caller`, `script` or `driver`")
    outcome: Literal["holds", "refused", "unreachable"] = Field(
        description="`holds`: NEW's engine accepts it; `refused`: it does not (or a route's work that "
        "passed prevalidation fails it under NEW); `unreachable`: the run under NEW is not where the "
        "entry was made (another step, node, task or delegation)"
    )
    reason: str | None = Field(
        default=None,
        description="refused: the engine's refusal, word for word; unreachable: where the run is instead",
    )


class ReplayStand(_Model):
    """Where the run would stand under NEW after its journal."""

    step: str | None = Field(default=None, description="absent once the workflow is complete")
    node: Literal["intake", "work", "delegated", "revise", "finished"]
    position: int = Field(ge=1, description="the cursor: every task before it is done")
    total: int = Field(ge=0, description="the tasks of the step's checklist")
    role: str = Field(description="as the run card names it: `Task 2/4`, `Checklist`, `Revise checklist`, …")
    status: Literal["stopped", "blocked", "complete"]
    completed_steps: list[str]
    attempt_id: str | None = Field(
        default=None, description="the directive's attempt id; absent once complete"
    )


class ReplayRun(_Model):
    """The run replayed, as its run.json and `todoflow status` say."""

    process_id: str
    workflow_id: str
    source: str = Field(description="the file the run's definition was read from")
    source_sha256: str | None = None
    status: Literal["running", "stopped", "blocked", "complete"]
    entries: int = Field(ge=0, description="the entries of its journal")


class Replay(_Model):
    """`todoflow replay RUN --against NEW --format json`: the run's journal through NEW's engine."""

    run: ReplayRun
    against: DiffSide
    check_workspace: bool = Field(
        description="files the run never checked were looked up in the workspace as it is now"
    )
    verdict: Literal["compatible", "compatible with refusals", "incompatible"] = Field(
        description="`compatible`: every entry holds; `compatible with refusals`: the first entry that "
        "does not hold is refused; `incompatible`: it is unreachable (NEW takes the run elsewhere)"
    )
    from_entry: int | None = Field(default=None, description="the first entry that does not hold")
    first_refusal: ReplayEntry | None = None
    entries: list[ReplayEntry]
    stands: ReplayStand
    directive: dict[str, Any] = Field(
        description="the directive NEW would hand out next, as MCP `status` returns it"
    )


class DiffRun(_Model):
    """`diff --runs`: a run of OLD, and what NEW would make of its journal (`todoflow replay`)."""

    process_id: str
    status: Literal["running", "stopped", "blocked", "complete", "damaged"]
    error: str | None = Field(default=None, description="damaged: why the run cannot be read")
    entries: int | None = Field(default=None, ge=0, description="the entries of its journal")
    verdict: Literal["compatible", "compatible with refusals", "incompatible"] | None = None
    from_entry: int | None = Field(default=None, description="the first entry that does not hold")
    first: ReplayEntry | None = Field(default=None, description="that entry, with its outcome and reason")
    first_refusal: ReplayEntry | None = None
    stands: ReplayStand | None = Field(default=None, description="where the run would stand under NEW")


class Diff(_Model):
    """`todoflow diff OLD NEW --format json`: what NEW changes of OLD."""

    old: DiffSide
    new: DiffSide
    equivalent: bool = Field(description="no difference but formatting and comments")
    workflow: list[FieldChange] | None = Field(
        default=None, description="id and title, when both are sources"
    )
    steps: list[StepChange]
    runs: list[DiffRun] | None = Field(
        default=None,
        description="with --runs: every run whose source_sha256 is OLD's, newest first, replayed against NEW",
    )


class DryRunProblem(_Model):
    """A pre-flight check that `todoflow run` with the same options would fail on."""

    check: Literal["workspace", "models", "agent", "replies", "mcp"] = Field(
        description="`workspace`: not a folder; `models`: a model, provider or key; `agent`: the agent "
        "cannot be made; `replies`: the replies file does not read or parse; `mcp`: a server that does "
        "not start or list its tools"
    )
    message: str = Field(description="the error `run` would print, naming what is wrong")


class DryRunAgent(_Model):
    """One agent that would drive nodes of a step, its model and its tools."""

    role: Literal["agent", "orchestrator", "sub-agent", "generic"] = Field(
        description="`agent`: a regular step's; `orchestrator`: a todo_task step's; `sub-agent`: a "
        "route's; `generic`: the generic execution agent"
    )
    route: str | None = Field(default=None, description="a sub-agent's route id")
    sub_step: str | None = Field(default=None, description="a sub-agent's step id")
    provider: str | None = Field(default=None, description="absent when no rule chose a model")
    model_id: str | None = None
    rule: str = Field(
        description="the rule that chose the model: `step conditional_llm`, `step execution_llm`, "
        "`preset`, `default`, or `none`"
    )
    tools: dict[str, list[str]] = Field(
        description="by node (`intake`, `work`, `revise`, `delegated`): every tool offered there, the "
        "decision tools first, then the workspace tools, then the MCP servers'"
    )


class DryRunFile(_Model):
    """A file a step (or a route's sub-step) expects, looked up in the workspace as it is now."""

    path: str
    owner: str = Field(description="the step or sub-step that expects it")
    exists: bool
    reason: str | None = Field(default=None, description="why it does not count as there")


class DryRunTask(_Model):
    position: int = Field(ge=1, description="in engine order: a task's identity")
    action: str
    expected_result: str
    constraints: list[str] = Field(default_factory=list)


class DryRunChecklist(_Model):
    """The checklist the engine would walk at a step, as far as it is known before the run."""

    source: Literal["step", "tasks", "given", "agent", "fast path"] = Field(
        description="`step`: a regular step is its own one task; `tasks`: the workflow's `tasks` "
        "block; `given`: `--tasks`; `agent`: the orchestrator composes it at intake; `fast path`: a "
        "todo per route, for learn_code's script"
    )
    tasks: list[DryRunTask]
    moves: list[str] = Field(default_factory=list, description="tasks moved by their dependencies, and why")


class DryRunLearnCode(_Model):
    """learn_code at a step whose mode declares it."""

    eligible: bool = Field(description="mode learn_code and at least one route")
    script: str = Field(description="`<step-id>/main.py` in the learnings folder")
    present: bool = Field(description="the script is there now")
    then: str = Field(description="what the run would do at the step")


class DryRunPrompt(_Model):
    agent: str = Field(description="`orchestrator`, `agent`, a route id or `generic`")
    node: str
    kind: str = Field(description="the template rendered: `intake`, `work`, `orchestrator_system`, …")
    text: str


class DryRunStep(_Model):
    index: int = Field(ge=1)
    id: str
    kind: Literal["regular", "todo_task"]
    title: str
    next: str = Field(description="the step that follows, or `end`")
    agents: list[DryRunAgent]
    max_turns: int | None = Field(default=None, description="the orchestrator's bound on turns")
    learn_code: DryRunLearnCode | None = None
    expected_files: list[DryRunFile]
    checklist: DryRunChecklist
    notes: list[str] = Field(default_factory=list)
    prompts: list[DryRunPrompt] | None = Field(default=None, description="with --show-prompts")


class DryRun(_Model):
    """`todoflow plan FLOW --format json`: what `todoflow run` with the same options would do."""

    workflow: DiffSide
    agent: str = Field(description="what would drive the run: `human`, `scripted:FILE`, `llm`")
    workspace: str
    store: str = Field(description="where the run would be created (nothing is)")
    learnings: str = Field(description="the learnings folder: learn_code's scripts are read there")
    shell: bool = Field(description="`run_command` is offered")
    tools: list[str] = Field(
        description="offered to every agent at every node beside its decision tools: the workspace "
        "tools, `run_command` with the shell on, the MCP servers' `mcp__<server>__<tool>` when checked"
    )
    mcp: Literal["checked", "not checked"] = Field(
        description="`checked`: the MCP servers were started and their tools listed (--check-mcp)"
    )
    ready: bool = Field(description="no pre-flight problem: `run` would start")
    preflight: list[DryRunProblem]
    steps: list[DryRunStep]


SCHEMAS: dict[str, type[_Model]] = {
    "plan": Plan,
    "step-config": StepConfig,
    "todos": Todos,
    "diff": Diff,
    "replay": Replay,
    "dry-run": DryRun,
}


DIALECT = "https://json-schema.org/draft/2020-12/schema"  # the draft pydantic writes


def schema(name: str) -> str:
    """The JSON Schema of a format: its dialect and identity (`urn:todoflow:schema:NAME`)
    first, then the model's schema with its keys sorted."""
    body = json.loads(dumps(SCHEMAS[name].model_json_schema()))
    document = {"$schema": DIALECT, "$id": f"urn:todoflow:schema:{name}", **body}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
