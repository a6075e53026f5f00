"""What the current node asks: the structured fields, and the prompt rendered from them.

At a todo_task step's work node the directive is the orchestrator's turn: the current
todo, the step's routes and whether the generic agent may be used, the turns used and
allowed, how the last delegation ended, and the model the step's agents should use;
its prompt is the step's `orchestrator_system`, `orchestrator_user` and `work`
templates. At the `delegated` node it is the sub-agent's, with a small context only:
the orchestrator's instructions and success criteria, the route's sub-step and its
active learnings — nothing else of the orchestrator's turn.

The prompt is rendered on demand (Jinja `SandboxedEnvironment`, `StrictUndefined`);
an error in a template is reported with the template's name and line, never as a
traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from todoflow.compiler.checklist import MAX_TASKS, MAX_TEXT
from todoflow.compiler.prompts import TEMPLATES, environment
from todoflow.dsl.diagnostics import TodoflowError

from .entries import GENERIC
from .llm_choice import LlmChoices, Selection, select_llm
from .orchestrator import out_of_turns
from .plan import Route, RunStep, SubStep, Task, Template
from .replies import MAX_INSTRUCTIONS, MAX_OUTCOME
from .state import ProcessState, turns_allowed

if TYPE_CHECKING:
    from .learnings import Learning
    from .store.base import LearningStore

LIMITS = {
    "max_tasks": MAX_TASKS,
    "max_text": MAX_TEXT,
    "max_evidence": MAX_OUTCOME,
    "max_instructions": MAX_INSTRUCTIONS,
}
MAX_PROMPT = 1_000_000  # characters a rendered prompt may hold


class Reader(NamedTuple):
    """Who reads a prompt, and so how it confirms a todo or gives one back: the `reply`
    record of the `work` and `sub_agent` prompts (each field a phrase the template places)."""

    confirm: str  # what it confirms with
    evidence: str  # the proof's name there
    summary: str  # the short outcome's name there
    give_back: str  # a sub-agent's way to give its todo back, as an instruction


# the LLM agent's tools: what `todoflow run --show-prompts` and `plan --show-prompts` show
TOOL_CALLS = Reader("`complete_todo`", "`evidence`", "`result`", "call `report_failure` with the reason")
# an MCP client: its `step` tool (the directive's JSON holds this prompt)
MCP_STEP = Reader(
    "the `step` tool", "`evidence`", "`progress_execution_outcome`", "call `step` with `failed`: the reason"
)
# a person at the terminal (`--agent human`)
TYPED = Reader("what you type", "the evidence", "the outcome", "type `failed <reason>`")


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
        llms: LlmChoices | None = None,
        learnings: LearningStore | None = None,
    ) -> None:
        self.process_id, self.attempt_id, self.state, self.step = process_id, attempt_id, state, step
        self.workflow, self.llms, self.learnings = workflow, llms or LlmChoices(), learnings

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
    def todo_id(self) -> str | None:
        """The current todo (`todo_<N>`) at a work or delegated node."""
        if self.node in ("work", "delegated") and self.state.position <= self.state.total:
            return f"todo_{self.state.position}"
        return None

    @property
    def ready_tasks(self) -> tuple[Task, ...] | None:
        return self.step.ready_tasks if self.step is not None and self.node == "intake" else None

    def ready_reply(self) -> dict[str, Any] | None:
        """The intake a runner sends for the caller: the ready checklist, unchanged (None:
        the step has none, or this is not its intake)."""
        ready = self.ready_tasks
        if ready is None:
            return None
        return {
            "tasks": [{"action": t.action, "expected_result": t.expected_result} for t in ready],
            # no count: create_todo can add to the list, and the card counts it as it stands
            "progress_checklist_outcome": "the ready checklist, passed on unchanged",
        }

    @property
    def orchestrated(self) -> bool:
        """An orchestrator's turn: the work node of a todo_task step."""
        return self.step is not None and self.step.kind == "todo_task" and self.node == "work"

    @property
    def route(self) -> Route | None:
        """At the delegated node: the route whose sub-agent has the todo (None: the generic agent)."""
        delegation = self.state.delegation
        if self.step is None or delegation is None:
            return None
        return self.step.route(delegation.agent)

    @property
    def blocked(self) -> str | None:
        """Why nobody may reply now (the orchestrator used all its turns), or None."""
        if self.step is None or self.step.kind != "todo_task":
            return None
        return out_of_turns(self.step, self.state, self.process_id)

    @property
    def todo_blocked(self) -> str | None:
        """The notes of the current todo, when it is marked blocked (update_todo)."""
        if self.todo_id is None:
            return None
        mark = self.state.mark(self.state.position)
        return (mark.notes or "blocked") if mark.status == "blocked" else None

    def status(self, driven: bool) -> str:
        """The run's state in the one vocabulary of the CLI, JSON, MCP and the card:
        `complete`, `blocked` (out of turns, or its todo marked blocked), `running` (a
        program drives it: `driven`) or `stopped`; a run that cannot be read is `damaged`."""
        if self.completed:
            return "complete"
        if self.blocked is not None or self.todo_blocked is not None:
            return "blocked"
        return "running" if driven else "stopped"

    @property
    def role(self) -> str:
        """The card's name for the current role: `Task N/M`, `Revise checklist`, `Checklist`,
        `Sub-agent <route> · Task N/M`, `Generic agent · Task N/M`."""
        if self.completed:
            return "Complete"
        if self.node == "revise":
            return "Revise checklist"
        if self.node == "intake":
            return "Checklist"
        task = f"Task {self.state.position}/{self.state.total}"
        if self.node == "delegated" and self.state.delegation is not None:
            agent = self.state.delegation.agent
            return f"Generic agent · {task}" if agent == GENERIC else f"Sub-agent {agent} · {task}"
        return task

    @property
    def llm(self) -> Selection | None:
        """The model the current agent should use, and the rule that chose it."""
        if self.step is None or self.completed:
            return None
        route = self.route
        configs = route.step.configs if route is not None else self.step.configs
        return select_llm("standard", configs, self.llms)

    def offered_learnings(self) -> list[Learning]:
        """A route's sub-agent's most recent active learnings (bounded)."""
        route = self.route
        if route is None or self.learnings is None:
            return []
        from .learnings import offered

        return offered(self.learnings.records(route.step_id))

    # -- the prompt ------------------------------------------------------------------------

    def prompt(self, reader: Reader = TOOL_CALLS) -> str:
        """The rendered prompt of the current node ('' once the workflow is complete), as
        `reader` confirms and gives back a todo."""
        parts = self.prompt_parts(reader)
        return "\n".join(text.rstrip("\n") + "\n" for _, text in parts) if parts else ""

    def system_prompt(self) -> str | None:
        """A todo_task step's `orchestrator_system` template: the standing instructions of
        its orchestrator at every node (None for a regular step)."""
        if self.step is None or self.completed or self.step.kind != "todo_task":
            return None
        return render(
            self.step.template("orchestrator_system"), "orchestrator_system", self.step, self.context()
        )

    def prompt_parts(self, reader: Reader = TOOL_CALLS) -> list[tuple[str, str]]:
        """The prompt as (kind, text) parts: an orchestrator's turn is its
        `orchestrator_system`, `orchestrator_user` and `work` templates, which an LLM agent
        sends as a system message and a user message."""
        if self.step is None or self.completed:
            return []
        if self.node == "delegated":
            return [("sub_agent", self._sub_agent_prompt(reader))]
        context = self.context() | {"reply": reader._asdict()}
        kinds = ("orchestrator_system", "orchestrator_user", "work") if self.orchestrated else (self.node,)
        parts = [(kind, render(self.step.template(kind), kind, self.step, context)) for kind in kinds]
        _bounded("".join(text for _, text in parts), self.step)
        return parts

    def context(self) -> dict[str, Any]:
        assert self.step is not None
        step, state = self.step, self.state
        tasks = [_task(t, i + 1, i + 1 < state.position) for i, t in enumerate(state.tasks)]
        context: dict[str, Any] = {
            "workflow": self.workflow,
            "step": _step(step),
            "limits": LIMITS,
            "position": state.position,
            "total": state.total,
            "tasks": tasks,
            "ready_tasks": [_task(t, i + 1, False) for i, t in enumerate(self.ready_tasks or ())],
            "todo_id": self.todo_id,
            "turns": {"used": state.turns, "allowed": turns_allowed(step, state)},
            "last_delegation": self._returned(),
        }
        if state.task is not None:
            context["task"] = tasks[state.position - 1]
        return context

    def _returned(self) -> dict[str, Any] | None:
        returned = self.state.returned
        if returned is None:
            return None
        return {
            "todo_id": f"todo_{returned.position}",
            "agent": returned.agent,
            "passed": returned.passed,
            "reason": returned.reason,
        }

    def _sub_agent_prompt(self, reader: Reader) -> str:
        assert self.step is not None
        route = self.route
        template = (
            route.step.template if route else Template("built-in sub_agent", TEMPLATES / "sub_agent.j2")
        )
        context = self.sub_agent_context() | {"reply": reader._asdict()}
        text = render(template, "sub_agent", self.step, context)
        return _bounded(text, self.step)

    def sub_agent_context(self) -> dict[str, Any]:
        """The small context of the delegated sub-agent: nothing else of the orchestrator's turn."""
        delegation = self.state.delegation
        assert delegation is not None
        route = self.route
        if route is None:
            step: dict[str, Any] = {**_EMPTY_STEP, "id": GENERIC, "title": "Generic agent", "kind": "generic"}
            route_record = {"id": GENERIC, "name": "Generic agent", "condition": "", "step_id": GENERIC}
        else:
            step = {**_EMPTY_STEP, **_sub_step(route.step)}
            route_record = _route(route)
        return {
            "workflow": self.workflow,
            "step": step,
            "route": route_record,
            "todo_id": f"todo_{delegation.position}",
            "instructions": delegation.instructions,
            "success_criteria": delegation.success_criteria or "",
            "limits": LIMITS,
            "learnings": [_learning(learning) for learning in self.offered_learnings()],
        }

    # -- as data -----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The directive as data: what an MCP client or `--json` receives."""
        if self.completed:
            return {"processId": self.process_id, "completed": True, "result": {}}
        step = self.step
        out: dict[str, Any] = {
            "processId": self.process_id,
            "attemptId": self.attempt_id,
            "completed": False,
            "node": self.node,
            "role": self.role,
            "step": {"id": step.id, "title": step.title, "kind": step.kind} if step else None,
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
        if self.orchestrated and step is not None:
            out |= self._orchestrator_json(step)
        if self.node == "delegated":
            out["delegation"] = self._delegation_json()
        blocked = self.blocked
        if blocked is not None:
            out["blocked"] = blocked
        llm = self.llm
        if llm is not None:
            out["llm"] = {
                "provider": llm.llm.provider if llm.llm else None,
                "model_id": llm.llm.model_id if llm.llm else None,
                "rule": llm.rule,
            }
        out["prompt"] = self.prompt(MCP_STEP)
        return out

    def _orchestrator_json(self, step: RunStep) -> dict[str, Any]:
        return {
            "todo_id": self.todo_id,
            "routes": [_route_json(route) for route in step.routes],
            "generic_agent": step.generic_agent,
            "turns": {"used": self.state.turns, "allowed": turns_allowed(step, self.state)},
            "last_delegation": self._returned(),
        }

    def _delegation_json(self) -> dict[str, Any]:
        delegation = self.state.delegation
        assert delegation is not None
        route = self.route
        return {
            "todo_id": f"todo_{delegation.position}",
            "agent": delegation.agent,
            "route_id": route.id if route else None,
            "instructions_to_sub_agent": delegation.instructions,
            "success_criteria_for_sub_agent": delegation.success_criteria,
            "sub_step": _sub_step(route.step) if route else None,
            "learnings": [_learning(learning) for learning in self.offered_learnings()],
        }


_EMPTY_STEP: dict[str, Any] = {
    "description": None,
    "success_criteria": None,
    "context_dependencies": [],
    "context_output": None,
    "expected_files": [],
    "routes": [],
    "generic_agent": False,
}


def _step(step: RunStep) -> dict[str, Any]:
    return {
        "id": step.id,
        "title": step.title,
        "kind": step.kind,
        "description": step.description,
        "success_criteria": step.success_criteria,
        "context_dependencies": list(step.context_dependencies),
        "context_output": step.context_output,
        "expected_files": list(step.expected_files),
        "routes": [_route(r) for r in step.routes],
        "generic_agent": step.generic_agent,
    }


def _route(route: Route) -> dict[str, Any]:
    return {"id": route.id, "name": route.name, "condition": route.condition, "step_id": route.step_id}


def _route_json(route: Route) -> dict[str, Any]:
    return {
        "route_id": route.id,
        "route_name": route.name,
        "condition": route.condition,
        "sub_step": _sub_step(route.step),
    }


def _sub_step(sub: SubStep) -> dict[str, Any]:
    """A route's sub-step as a sub-agent and the orchestrator see it."""
    return {
        "id": sub.id,
        "title": sub.title,
        "description": sub.description,
        "success_criteria": sub.success_criteria,
        "context_dependencies": list(sub.context_dependencies),
        "context_output": sub.context_output,
        "expected_files": list(sub.expected_files),
    }


def _learning(learning: Learning) -> dict[str, Any]:
    return {
        "id": learning.id,
        "at": learning.at,
        "instructions": learning.instructions,
        "success_criteria": learning.success_criteria,
        "evidence": learning.evidence,
        "outcome": learning.outcome,
        "files": [file.path for file in learning.files],
    }


def _task(task: Task, position: int, done: bool) -> dict[str, Any]:
    return {
        "position": position,
        "action": task.action,
        "expected_result": task.expected_result,
        "constraints": list(task.constraints),
        "done": done,
    }


def _bounded(text: str, step: RunStep) -> str:
    if len(text) > MAX_PROMPT:
        raise PromptError(
            f"the prompt of step `{step.id}` is {len(text):,} characters; at most {MAX_PROMPT:,} "
            "(a template that repeats itself?)"
        )
    return text


def render(template: Template, kind: str, step: RunStep, context: dict[str, Any]) -> str:
    from jinja2 import TemplateError
    from jinja2.debug import rewrite_traceback_stack

    try:
        compiled = _compiled(template.text)
        try:  # the template's own parts, without `generate`'s generator around each one
            return _joined(compiled.root_render_func(compiled.new_context(context)), kind, step, template)
        except Exception:
            raise rewrite_traceback_stack() from None  # with the template's lines, as `generate` raises it
    except PromptError:
        raise
    except Exception as error:  # a template's own failure (ZeroDivisionError too): never a traceback
        line = getattr(error, "lineno", None) or _template_line(error.__traceback__)
        where = f"{template.name}, line {line}" if line else template.name
        problem = error if isinstance(error, TemplateError) else f"{type(error).__name__}: {error}"
        raise PromptError(f"the `{kind}` prompt of step `{step.id}` ({where}) failed: {problem}") from None


def _joined(parts: Iterator[str], kind: str, step: RunStep, template: Template) -> str:
    """The rendered `parts`, stopped before they grow past `MAX_PROMPT`."""
    taken, size = [], 0
    for part in parts:
        size += len(part)
        if size > MAX_PROMPT:
            raise PromptError(
                f"the `{kind}` prompt of step `{step.id}` ({template.name}) renders more than "
                f"{MAX_PROMPT:,} characters"
            )
        taken.append(part)
    return "".join(taken)


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
