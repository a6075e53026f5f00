"""The file formats of the TodoTaskPlanStep platform, as pydantic models.

plan.json (the flat format, with our `tasks` and `generic_agent` extensions),
step_config.json and todos.json (seeds/todo-task-plan-step.md). The same models
write the files and give their JSON Schemas (`todoflow schema`), so an emitted file
always validates against the published schema. Optional fields are omitted when
empty, never written as null.
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


SCHEMAS: dict[str, type[_Model]] = {"plan": Plan, "step-config": StepConfig, "todos": Todos}


DIALECT = "https://json-schema.org/draft/2020-12/schema"  # the draft pydantic writes


def schema(name: str) -> str:
    """The JSON Schema of a format: its dialect and identity (`urn:todoflow:schema:NAME`)
    first, then the model's schema with its keys sorted."""
    body = json.loads(dumps(SCHEMAS[name].model_json_schema()))
    document = {"$schema": DIALECT, "$id": f"urn:todoflow:schema:{name}", **body}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
