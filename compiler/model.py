"""The checked workflow: the one resolved model every emitter renders.

Built by `compiler.lower` from the AST once every check has passed: defaults are
applied, `next` is resolved, tasks are ordered and numbered, constraints are
attached, prompts are resolved. Spans are kept so later stages can still point at
the `.todoflow` text. Imports `dsl` only.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal, TypeAlias

from todoflow.dsl.nodes import node
from todoflow.dsl.spans import Span

StepKind: TypeAlias = Literal["regular", "todo_task"]


@node
class LlmChoice:
    provider: str
    model_id: str


@node
class AgentConfigs:
    execution_max_turns: int | None = None
    execution_llm: LlmChoice | None = None
    conditional_llm: LlmChoice | None = None

    @property
    def empty(self) -> bool:
        return (
            self.execution_max_turns is None and self.execution_llm is None and self.conditional_llm is None
        )


@node
class CheckedTask:
    """A task of a ready checklist; `position` (1-based, after ordering) is its identity."""

    position: int
    label: str | None
    action: str
    expected_result: str
    constraints: tuple[str, ...]
    after: tuple[str, ...] = ()  # the labels it was written to come after


@node
class ResolvedPrompt:
    """The template a step uses for one prompt kind, and where it came from."""

    kind: str
    template: str
    origin: Literal["built-in", "workflow", "step"]
    file: str | None = None  # the template file, for `prompt KIND from "file"`


@node
class CheckedRoute:
    id: str
    name: str
    condition: str
    step: CheckedStep
    span: Span = field(compare=False)


@node
class CheckedStep:
    kind: StepKind
    id: str
    title: str
    description: str | None
    success_criteria: str | None
    context_dependencies: tuple[str, ...]
    context_output: str | None
    expected_files: tuple[str, ...]
    next_step_id: str | None  # None for a sub-agent step, which returns to its orchestrator
    agent_configs: AgentConfigs
    declared_execution_mode: Literal["learn_code"] | None
    routes: tuple[CheckedRoute, ...]
    generic_agent: bool
    tasks: tuple[CheckedTask, ...] | None  # None: the orchestrator composes the list at run time
    prompts: tuple[ResolvedPrompt, ...]
    span: Span = field(compare=False)

    def walk(self) -> tuple[CheckedStep, ...]:
        """This step, then every sub-agent step inside its routes, depth first."""
        out = [self]
        for route in self.routes:
            out += route.step.walk()
        return tuple(out)

    def prompt(self, kind: str) -> ResolvedPrompt:
        return next(p for p in self.prompts if p.kind == kind)


@node
class CheckedWorkflow:
    id: str
    title: str
    steps: tuple[CheckedStep, ...]
    path: str
    source_sha256: str
    reachable: tuple[str, ...]  # top-level step ids that can run, in run order of discovery
    span: Span = field(compare=False)

    def all_steps(self) -> tuple[CheckedStep, ...]:
        return tuple(s for top in self.steps for s in top.walk())

    def step(self, step_id: str) -> CheckedStep:
        return next(s for s in self.all_steps() if s.id == step_id)
