"""Emit stage: `CheckedWorkflow` -> `Artifacts`, every output file as text in memory.

plan.json and step_config.json are written through the pydantic models of
`compiler.formats`; the machine, its module and its Mermaid diagram come from one
`Machine` value; `prompts/<step-id>/<kind>.j2` are the resolved templates. Output is
byte-identical for the same input. Nothing here touches disk: `compiler.output`
writes a compiled folder, once everything was emitted.
"""

from __future__ import annotations

from pathlib import Path

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from . import formats
from .machine import Machine, module_source, structure_problems, workflow_machine
from .model import AgentConfigs, CheckedStep, CheckedWorkflow


class CompilerError(TodoflowError):
    """An internal inconsistency of the compiler, never a problem of the source."""


@node
class Artifacts:
    workflow_id: str
    machine: Machine
    files: tuple[tuple[str, str], ...]  # (relative path, text), sorted by path

    def file(self, relative: str) -> str:
        return dict(self.files)[relative]


def emit(workflow: CheckedWorkflow) -> Artifacts:
    from .diagrams import mermaid

    machine = workflow_machine(workflow)
    problems = structure_problems(machine)
    if problems:  # the checks above should make this impossible: a compiler bug, said plainly
        raise CompilerError(f"the machine of workflow `{workflow.id}` is malformed: " + "; ".join(problems))
    files = {
        "plan.json": formats.plan_json((_plan_step(s) for s in workflow.steps), workflow.source_sha256),
        "step_config.json": step_config_model(workflow).to_json(),
        # named by its file alone: the output must not depend on where it was compiled from
        f"machines/{workflow.id}.py": module_source(
            machine, Path(workflow.path).name, workflow.source_sha256
        ),
        f"machines/{workflow.id}.mmd": mermaid(machine),
    }
    for step in workflow.all_steps():
        for prompt in step.prompts:
            files[f"prompts/{step.id}/{prompt.kind}.j2"] = prompt.template
    return Artifacts(workflow.id, machine, tuple(sorted(files.items())))


def plan_model(workflow: CheckedWorkflow) -> formats.Plan:
    return formats.Plan(steps=[_plan_step(s) for s in workflow.steps], source_sha256=workflow.source_sha256)


def _plan_step(step: CheckedStep) -> formats.PlanStep:
    routes = [
        formats.PredefinedRoute(
            route_id=r.id, route_name=r.name, condition=r.condition, sub_agent_step=_plan_step(r.step)
        )
        for r in step.routes
    ]
    files = [formats.FileCheck(file_name=name) for name in step.expected_files]
    tasks = (
        [
            formats.PlanTask(
                action=t.action,
                expected_result=t.expected_result,
                constraints=list(t.constraints) or None,
                label=t.label,
                after=list(t.after) or None,
            )
            for t in step.tasks
        ]
        if step.tasks
        else None
    )
    return formats.PlanStep(
        type=step.kind,
        id=step.id,
        title=step.title,
        description=step.description or None,
        success_criteria=step.success_criteria or None,
        context_dependencies=list(step.context_dependencies) or None,
        context_output=step.context_output or None,
        validation_schema=formats.ValidationSchema(files=files) if files else None,
        predefined_routes=routes or None,
        tasks=tasks,
        generic_agent=None if step.generic_agent or step.kind != "todo_task" else False,
        next_step_id=step.next_step_id,
    )


def step_config_model(workflow: CheckedWorkflow) -> formats.StepConfig:
    entries = [
        formats.StepConfigEntry(
            id=step.id,
            declared_execution_mode=step.declared_execution_mode,
            agent_configs=_agent_configs(step.agent_configs),
        )
        for step in workflow.all_steps()
        if step.declared_execution_mode or not step.agent_configs.empty
    ]
    entries.sort(key=lambda entry: entry.id)
    return formats.StepConfig(steps=entries, source_sha256=workflow.source_sha256)


def _agent_configs(configs: AgentConfigs) -> formats.AgentConfigsModel:
    def llm(choice: object) -> formats.LlmConfig | None:
        if choice is None:
            return None
        return formats.LlmConfig(provider=choice.provider, model_id=choice.model_id)  # type: ignore[attr-defined]

    return formats.AgentConfigsModel(
        execution_max_turns=configs.execution_max_turns,
        execution_llm=llm(configs.execution_llm),
        conditional_llm=llm(configs.conditional_llm),
    )
