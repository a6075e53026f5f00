"""`todoflow plan`: what `todoflow run` with the same options would do, step by step,
creating nothing — no run, no store location touched, no process started, no model called.

For each step in order: who would drive each node (a regular step's agent; a todo_task
step's orchestrator, each route's sub-agent and the generic agent), the model each uses
and the rule that chose it (the same `Directive.llm` a run asks), the tools each is
offered (`llm.offered`'s decision tools, then `offer`'s workspace and MCP tools),
`max_turns`, learn_code and its script, the expected files as the workspace holds them
now, the checklist in engine order with its moves and constraints, and on request the
prompts rendered. Each agent is asked through a directive made for a state the run would
reach (the step entered, its first task, a delegation), never through an engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from todoflow.compiler.formats import (
    DiffSide,
    DryRun,
    DryRunAgent,
    DryRunChecklist,
    DryRunFile,
    DryRunLearnCode,
    DryRunProblem,
    DryRunPrompt,
    DryRunStep,
    DryRunTask,
)
from todoflow.dsl.nodes import node, replace

from ..definition import RunDefinition
from ..directive import Directive
from ..entries import GENERIC, ORCHESTRATOR
from ..llm_choice import LlmChoices
from ..orchestrator import learn_code
from ..plan import RunPlan, RunStep, Task
from ..state import Delegation, Draft, ProcessState, initial_state
from ..workspace import missing
from .fast_path import SCRIPT, planned
from .llm import offered
from .offer import tools_offered
from .preflight import Problem

AT = "1970-01-01T00:00:00Z"  # a state's timestamps: display only, never in a plan's output
INSTRUCTIONS = "(the orchestrator's instructions for the todo)"  # a delegation's, unknown before the run


@node
class Setting:
    """What `run` would be given, as the plan reads it."""

    agent: str
    workspace: Path
    store: str
    learnings: Path
    llms: LlmChoices
    shell: bool = False
    mcp: tuple[str, ...] | None = None  # the MCP servers' tools; None: not checked
    show_prompts: bool = False
    fast_path_only: bool = False
    given: frozenset[str] = frozenset()  # steps whose checklist `--tasks` gives


def dry_run(
    definition: RunDefinition,
    shown: str,
    plan: RunPlan,
    setting: Setting,
    moves: Mapping[str, Sequence[str]],
    problems: Sequence[Problem],
) -> DryRun:
    """The plan of a run of `plan` (the definition's, with `--tasks` given), step by step
    (`shown`: the definition's path as given)."""
    workflow = {"id": definition.workflow_id, "title": definition.title}
    named = Path(definition.source).suffix != ".json"  # a plan.json names no workflow
    side = DiffSide(
        path=shown,
        workflow_id=definition.workflow_id if named else None,
        title=definition.title if named else None,
        source_sha256=definition.source_sha256,
    )
    return DryRun(
        workflow=side,
        agent=setting.agent,
        workspace=str(setting.workspace),
        store=setting.store,
        learnings=str(setting.learnings),
        shell=setting.shell,
        tools=list(tools_offered((), setting.shell, setting.mcp or ())),
        mcp="not checked" if setting.mcp is None else "checked",
        ready=not problems,
        preflight=[DryRunProblem(check=p.check, message=p.message) for p in problems],
        steps=[_step(plan, step, workflow, setting, moves.get(step.id, ())) for step in plan.steps],
    )


def _step(
    plan: RunPlan, step: RunStep, workflow: dict[str, str], setting: Setting, moves: Sequence[str]
) -> DryRunStep:
    checklist = _checklist(step, setting, moves)
    directives = _directives(plan, step, workflow, setting, checklist.tasks)
    return DryRunStep(
        index=step.index + 1,
        id=step.id,
        kind=step.kind,  # type: ignore[arg-type]
        title=step.title,
        next=step.next_step_id,
        agents=_agents(directives, setting),
        max_turns=step.configs.execution_max_turns if step.kind == "todo_task" else None,
        learn_code=_learn_code(step, setting),
        expected_files=_expected(step, setting.workspace),
        checklist=checklist,
        prompts=_prompts(directives) if setting.show_prompts else None,
    )


Agents = list[tuple[str, list[Directive]]]  # (who, the directives of the nodes where it works)


def _directives(
    plan: RunPlan, step: RunStep, workflow: dict[str, str], setting: Setting, tasks: Sequence[DryRunTask]
) -> Agents:
    """A directive for each node each agent of the step works at, in the order a run
    meets them."""
    draft = Draft(initial_state(plan, AT))
    draft.enter(plan, step.id, AT)
    entered = draft.frozen()

    def at(state: ProcessState) -> Directive:
        return Directive("(plan)", "", state, step, workflow, setting.llms)

    if step.kind == "regular":
        return [("agent", [at(entered)])]
    listed = tuple(Task(t.action, t.expected_result, tuple(t.constraints)) for t in tasks)
    working = replace(entered, node="work", tasks=listed, position=1)
    found: Agents = [
        (ORCHESTRATOR, [at(entered), at(working), at(replace(working, node="revise"))]),
    ]
    helpers = [route.id for route in step.routes] + ([GENERIC] if step.generic_agent else [])
    for agent in helpers:
        delegation = Delegation(1, agent, INSTRUCTIONS, None, 0, 0)
        found.append((agent, [at(replace(working, node="delegated", delegation=delegation))]))
    return found


def _agents(directives: Agents, setting: Setting) -> list[DryRunAgent]:
    agents, mcp = [], setting.mcp or ()
    for who, nodes in directives:
        first = nodes[0]
        selection = first.llm
        route = first.route
        agents.append(
            DryRunAgent(
                role=_role(who, first),
                route=route.id if route else None,
                sub_step=route.step_id if route else None,
                provider=selection.llm.provider if selection and selection.llm else None,
                model_id=selection.llm.model_id if selection and selection.llm else None,
                rule=selection.rule if selection else "none",
                tools={d.node: list(tools_offered(offered(d), setting.shell, mcp)) for d in nodes},
            )
        )
    return agents


def _role(who: str, directive: Directive) -> Literal["agent", "orchestrator", "sub-agent", "generic"]:
    if who == ORCHESTRATOR:
        return "orchestrator"
    if who == GENERIC:
        return "generic"
    return "sub-agent" if directive.node == "delegated" else "agent"


def _checklist(step: RunStep, setting: Setting, moves: Sequence[str]) -> DryRunChecklist:
    """The checklist the engine would walk first, in its order, with its moves."""
    if step.kind == "regular":
        criteria = step.success_criteria or "The step's work is done and checked."
        task = Task(step.description or step.title, criteria)
        return DryRunChecklist(source="step", tasks=[_task(1, task)])
    if step.ready_tasks is not None:
        source = "given" if step.id in setting.given else "tasks"
        tasks = [_task(i, t) for i, t in enumerate(step.ready_tasks, start=1)]
        return DryRunChecklist(source=source, tasks=tasks, moves=list(moves))  # type: ignore[arg-type]
    if learn_code(step):
        items = planned(step)["tasks"]
        tasks = [_task(i, Task(t["action"], t["expected_result"])) for i, t in enumerate(items, start=1)]
        return DryRunChecklist(source="fast path", tasks=tasks)
    return DryRunChecklist(source="agent", tasks=[])


def _task(position: int, task: Task) -> DryRunTask:
    return DryRunTask(
        position=position,
        action=task.action,
        expected_result=task.expected_result,
        constraints=list(task.constraints),
    )


def _learn_code(step: RunStep, setting: Setting) -> DryRunLearnCode | None:
    if step.configs.declared_execution_mode != "learn_code":
        return None
    script = f"{step.id}/{SCRIPT}"
    present = (setting.learnings / script).is_file()
    if not learn_code(step):
        then = "not eligible (the step has no route): the orchestrator runs the step"
    elif present:
        then = (
            f"{SCRIPT} runs the step, with no orchestrator"
            if setting.fast_path_only
            else f"{SCRIPT} runs first; if it fails, the orchestrator starts the step afresh"
        )
    elif setting.fast_path_only:
        then = f"fast_path_only and no {SCRIPT}: the run would stop at this step"
    else:
        then = "the orchestrator runs the step"
    return DryRunLearnCode(eligible=learn_code(step), script=script, present=present, then=then)


def _expected(step: RunStep, workspace: Path) -> list[DryRunFile]:
    owned = [(step.id, name) for name in step.expected_files]
    owned += [(route.step_id, name) for route in step.routes for name in route.step.expected_files]
    found = []
    for owner, name in owned:
        reason = missing(workspace, name)
        exists = reason is None
        if reason is not None and reason.endswith("does not exist in the workspace"):
            reason = None  # plain absence: the step is to make it
        found.append(DryRunFile(path=name, owner=owner, exists=exists, reason=reason))
    return found


def _prompts(directives: Agents) -> list[DryRunPrompt]:
    """Each agent's rendered prompt at each node it works at, as far as the run's state is
    known before it starts (the orchestrator's turn needs a checklist)."""
    found = []
    for who, nodes in directives:
        for directive in nodes:
            if directive.node in ("work", "revise") and not directive.state.tasks:
                continue
            for kind, text in directive.prompt_parts():
                found.append(DryRunPrompt(agent=who, node=directive.node, kind=kind, text=text))
    return found


# -- as text -----------------------------------------------------------------------------

CHECKLIST_SOURCE = {
    "step": "the step itself",
    "tasks": "the `tasks` block, in engine order",
    "given": "given with --tasks, in engine order",
    "fast path": "learn_code's, a todo per route",
    "agent": "composed by the orchestrator at intake",
}


def text(dry: DryRun) -> str:
    """The plan for people: the run's setting, each step, then the pre-flight's verdict."""
    lines = [*_header(dry), ""]
    for step in dry.steps:
        lines += [*_step_text(step, set(dry.tools)), ""]
    lines += _verdict(dry)
    return "\n".join(lines) + "\n"


def _header(dry: DryRun) -> list[str]:
    side = dry.workflow
    named = f"workflow `{side.workflow_id}` {_quoted(side.title or '')}, " if side.workflow_id else ""
    shell = "" if dry.shell else "; no run_command (the shell is off: --allow-shell)"
    tools = ", ".join(t for t in dry.tools if not t.startswith("mcp__"))
    mcp = [t for t in dry.tools if t.startswith("mcp__")]
    servers = (
        f"MCP tools: {', '.join(mcp) or 'none'}"
        if dry.mcp == "checked"
        else "MCP servers: not checked (--check-mcp starts them and lists their tools)"
    )
    return [
        f"plan of {side.path}: {named}source_sha256 {side.source_sha256[:12]}…",
        f"  driven by: {dry.agent}",
        f"  workspace: {dry.workspace}",
        f"  store: {dry.store} (nothing is created)",
        f"  learnings: {dry.learnings}",
        f"  every agent, beside its decision tools: {tools}{shell}",
        f"  {servers}",
    ]


def _step_text(step: DryRunStep, common: set[str]) -> list[str]:
    then = "then end" if step.next == "end" else f"then `{step.next}`"
    lines = [f"{step.index}. {step.id} — {step.kind} {_quoted(step.title)}, {then}"]
    if step.max_turns is not None:
        lines.append(f"   max_turns: {step.max_turns}")
    if step.learn_code is not None:
        learned = step.learn_code
        found = "in the learnings folder" if learned.present else "not in the learnings folder"
        lines.append(f"   learn_code: {learned.script} {found}: {learned.then}")
    for agent in step.agents:
        lines.append(f"   {_who(agent)}: {_model(agent)}")
        for node_, tools in agent.tools.items():
            lines.append(f"     {node_}: {', '.join(t for t in tools if t not in common)}")
    if step.expected_files:
        lines.append("   expects: " + "; ".join(_file(f, step.id) for f in step.expected_files))
    checklist = step.checklist
    size = len(checklist.tasks)
    count = f"{size} task{'s' if size != 1 else ''}, " if size else ""
    lines.append(f"   checklist: {count}{CHECKLIST_SOURCE[checklist.source]}")
    for task in checklist.tasks:
        held = f"  [constraints: {', '.join(map(_quoted, task.constraints))}]" if task.constraints else ""
        lines.append(f"     {task.position}. {_quoted(task.action)} => {_quoted(task.expected_result)}{held}")
    lines += [f"     moved: {move}" for move in checklist.moves]
    for prompt in step.prompts or []:
        lines.append(f"   prompt of {_whose(prompt.agent)} at {prompt.node} ({prompt.kind}):")
        lines += [f"     | {line}".rstrip() for line in prompt.text.rstrip("\n").splitlines()]
    return lines


def _verdict(dry: DryRun) -> list[str]:
    if dry.ready:
        return ["pre-flight: ok — `todoflow run` with these options would start"]
    count = len(dry.preflight)
    lines = [
        f"pre-flight: {count} problem{'s' if count != 1 else ''} — `todoflow run` with these options "
        "would stop before creating anything:"
    ]
    for problem in dry.preflight:
        lines.append(f"  {problem.check}: {problem.message}".replace("\n", "\n  "))
    return lines


def _who(agent: DryRunAgent) -> str:
    if agent.role == "sub-agent":
        return f"sub-agent of route `{agent.route}` (step `{agent.sub_step}`)"
    return {"generic": "generic agent", "orchestrator": "orchestrator", "agent": "agent"}[agent.role]


def _whose(agent: str) -> str:
    named = {ORCHESTRATOR: "the orchestrator", "agent": "the agent", GENERIC: "the generic agent"}
    return named.get(agent, f"route `{agent}`'s sub-agent")


def _model(agent: DryRunAgent) -> str:
    if agent.provider is None:
        return "no model (rule: none)"
    return f"{agent.provider}:{agent.model_id} ({agent.rule})"


def _file(file: DryRunFile, step_id: str) -> str:
    owner = "" if file.owner == step_id else f"{file.owner}: "
    state = "there" if file.exists else (file.reason or "not there yet")
    return f"{owner}{file.path} ({state})"


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)
