"""What the current node asks: the structured fields, and the prompt rendered from them.

The prompt is rendered on demand from the template the compiler resolved for the
step and node kind (Jinja `SandboxedEnvironment`, `StrictUndefined`); an error in a
template is reported with the template's name and line, never as a traceback.
"""

from __future__ import annotations

from functools import lru_cache
from types import TracebackType
from typing import Any

from todoflow.compiler.checklist import MAX_TASKS, MAX_TEXT
from todoflow.compiler.prompts import environment
from todoflow.dsl.diagnostics import TodoflowError

from .plan import RunStep, Task, Template
from .replies import MAX_OUTCOME
from .state import ProcessState

LIMITS = {"max_tasks": MAX_TASKS, "max_text": MAX_TEXT, "max_evidence": MAX_OUTCOME}


class PromptError(TodoflowError):
    """A template that failed to render, named with its line."""


class Directive:
    """The engine's answer to "what now?" for one process state."""

    def __init__(
        self,
        process_id: str,
        attempt_id: str,
        state: ProcessState,
        step: RunStep | None,
        workflow: dict[str, str],
        notes: tuple[str, ...] = (),
    ) -> None:
        self.process_id, self.attempt_id, self.state, self.step = process_id, attempt_id, state, step
        self.workflow, self.notes = workflow, notes

    @property
    def completed(self) -> bool:
        return self.state.finished

    @property
    def node(self) -> str:
        return self.state.node

    @property
    def task(self) -> Task | None:
        return self.state.task

    @property
    def ready_tasks(self) -> tuple[Task, ...] | None:
        return self.step.ready_tasks if self.step is not None and self.node == "intake" else None

    @property
    def role(self) -> str:
        """The card's name for the current role: `Task N/M`, `Revise checklist`, `Checklist`."""
        if self.completed:
            return "Complete"
        if self.node == "revise":
            return "Revise checklist"
        if self.node == "intake":
            return "Checklist"
        return f"Task {self.state.position}/{self.state.total}"

    def prompt(self) -> str:
        """The rendered prompt of the current node ('' once the workflow is complete)."""
        if self.step is None or self.completed:
            return ""
        template = self.step.template(self.node)
        return render(template, self.node, self.step, self.context())

    def context(self) -> dict[str, Any]:
        assert self.step is not None
        step, state = self.step, self.state
        tasks = [_task(t, i + 1, i + 1 < state.position) for i, t in enumerate(state.tasks)]
        context: dict[str, Any] = {
            "workflow": self.workflow,
            "step": {
                "id": step.id,
                "title": step.title,
                "kind": step.kind,
                "description": step.description,
                "success_criteria": step.success_criteria,
                "context_dependencies": list(step.context_dependencies),
                "context_output": step.context_output,
                "expected_files": list(step.expected_files),
                "routes": [
                    {"id": r.id, "name": r.name, "condition": r.condition, "step_id": r.step_id}
                    for r in step.routes
                ],
                "generic_agent": step.generic_agent,
            },
            "limits": LIMITS,
            "position": state.position,
            "total": state.total,
            "tasks": tasks,
            "ready_tasks": [_task(t, i + 1, False) for i, t in enumerate(step.ready_tasks or ())],
        }
        if state.task is not None:
            context["task"] = tasks[state.position - 1]
        return context

    def to_json(self) -> dict[str, Any]:
        """The directive as data: what an MCP client or `--json` receives."""
        if self.completed:
            return {"processId": self.process_id, "completed": True, "result": {}}
        out: dict[str, Any] = {
            "processId": self.process_id,
            "attemptId": self.attempt_id,
            "completed": False,
            "node": self.node,
            "role": self.role,
            "step": {"id": self.step.id, "title": self.step.title, "kind": self.step.kind}
            if self.step
            else None,
            "position": self.state.position,
            "total": self.state.total,
        }
        if self.task is not None:
            out["task"] = self.task.as_dict()
        if self.node == "intake":
            ready = self.ready_tasks
            out["ready_tasks"] = [t.as_dict() for t in ready] if ready is not None else None
        if self.node == "revise":
            out["tasks"] = [t.as_dict() for t in self.state.tasks]
        if self.notes:
            out["notes"] = list(self.notes)
        out["prompt"] = self.prompt()
        return out


def _task(task: Task, position: int, done: bool) -> dict[str, Any]:
    return {
        "position": position,
        "action": task.action,
        "expected_result": task.expected_result,
        "constraints": list(task.constraints),
        "done": done,
    }


def render(template: Template, kind: str, step: RunStep, context: dict[str, Any]) -> str:
    from jinja2 import TemplateError

    try:
        return str(_compiled(template.text).render(**context))
    except TemplateError as error:
        line = getattr(error, "lineno", None) or _template_line(error.__traceback__)
        where = f"{template.name}, line {line}" if line else template.name
        raise PromptError(f"the `{kind}` prompt of step `{step.id}` ({where}) failed: {error}") from None


@lru_cache(maxsize=256)  # bounded: a server renders the templates of many runs
def _compiled(text: str) -> Any:
    return environment().from_string(text)


def _template_line(trace: TracebackType | None) -> int | None:
    line = None
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == "<template>":
            line = trace.tb_lineno
        trace = trace.tb_next
    return line
