"""What `todoflow serve` offers beside its tools: MCP resources (runs, a run's card, log
and report, a workflow's source and canvas) and prompts (`run_workflow`, `review_run`),
as text for `serve.mcp` to register. Reading one changes nothing: no step is taken, no
learn_code script started; only what the views read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from todoflow.compiler.analysis import analyze_file
from todoflow.compiler.canvas import mermaid, plan_canvas
from todoflow.dsl.diagnostics import TodoflowError

from ..store.base import final_todos
from ..views.card import card_data
from ..views.log import log_json, log_text
from ..views.report import read_run, run_report
from ..views.report_html import render
from .service import ServeError, TodoService, bounded, canonical

INSTRUCTIONS = (
    "Todo-task workflows whose engine, not the model, decides when work is done. Call `start` with "
    "action `prepare` (a workflowId; optionally a ready checklist in `tasks` or a `goal`), then `start` "
    "with action `execute`. Then answer each directive with `step` (its processId and attemptId): at "
    "`intake` send the checklist; at `work` either do the task yourself, check its expected result and "
    "confirm it with `evidence` + `progress_execution_outcome`, or — in a todo_task step, as the "
    "orchestrator — delegate it with `next_action: delegate` to one of the directive's `routes` "
    "(`selected_route_id`) or the generic agent (`use_generic_agent: true`), giving the sub-agent "
    "complete `instructions_to_sub_agent`: it sees nothing else. The next directive (node `delegated`) "
    "is then the sub-agent's: hand it to a sub-agent of your own if you have them; it answers with "
    "`evidence` + `progress_execution_outcome`, or `failed`. A route's answer passes only when its "
    "expected files exist. If a task is blocked, mark it with `update_todo` (status blocked) instead of "
    "confirming it. If the checklist is wrong, send teleportTo 'teleport-revise-tasks'. A learn_code "
    "step is orchestrated by its own script: you only answer its `delegated` directives; a reply with "
    "`fastPath: running` and no delegation means the script is busy: call `status` for the next one."
)

RUNS = "todoflow://runs"
RUN = "todoflow://runs/{processId}"
RUN_LOG = "todoflow://runs/{processId}/log"
RUN_REPORT = "todoflow://runs/{processId}/report"
WORKFLOW = "todoflow://workflows/{workflowId}"


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _process(process_id: str) -> str:
    pid = bounded("processId", process_id, required=True)
    assert pid is not None
    return canonical(pid)


def runs(service: TodoService) -> str:
    """Every run (its status, workflow and role), the workflows served and their problems."""
    return _json(service.status(None))


def run_card(service: TodoService, process_id: str) -> str:
    """One run's card, as `status {processId}` gives it, without advancing anything."""
    with service.engines.use(_process(process_id)) as engine:
        directive = engine.directive()
        state = directive.status(service.runs.driven(engine.process_id))
        finished = final_todos(engine.store, directive.state.completed_steps)
        return _json(card_data(directive, finished, state) | {"directive": directive.to_json()})


def run_log(service: TodoService, process_id: str) -> str:
    """The execution log (`todoflow log`): steps, iterations, entries."""
    with service.engines.use(_process(process_id)) as engine:
        engine.directive()  # a damaged run is refused here, saying what is wrong
        entries = engine.store.entries()
        return log_text(log_json(engine.plan, engine.process_id, engine.store.started_at, entries))


def run_report_html(service: TodoService, process_id: str) -> str:
    """The run report (`todoflow report`), one self-contained HTML page."""
    try:
        return render(run_report(read_run(service.runs, _process(process_id))))
    except TodoflowError as error:
        raise ServeError(str(error)) from None


def workflow(service: TodoService, workflow_id: str) -> str:
    """A workflow's source and its plan canvas as Mermaid (None for a plan.json made elsewhere)."""
    definition = service.workflows.offer(bounded("workflowId", workflow_id, required=True) or "").or_raise()
    file = Path(definition.source)
    canvas = None
    if file.suffix == ".todoflow":
        checked = analyze_file(file).workflow
        canvas = mermaid(plan_canvas(checked)) if checked is not None else None
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ServeError(f"cannot read workflow `{definition.workflow_id}`: {error}") from None
    steps = [{"id": s.id, "type": s.kind, "title": s.title} for s in definition.plan.steps]
    return _json(
        {
            "workflowId": definition.workflow_id,
            "title": definition.title,
            "file": file.name,
            "steps": steps,
            "source": text,
            "mermaid": canvas,
        }
    )


def run_workflow(service: TodoService, workflow_id: str, goal: str | None = None) -> str:
    """The message a client's model needs to run a workflow with this server's tools."""
    definition = service.workflows.offer(bounded("workflowId", workflow_id, required=True) or "").or_raise()
    goal = bounded("goal", goal)
    steps = "\n".join(f"{n}. `{s.id}` ({s.kind}): {s.title}" for n, s in enumerate(definition.plan.steps, 1))
    prepare = {"action": "prepare", "workflowId": definition.workflow_id, "parentExecutionId": "none"}
    if goal:
        prepare["goal"] = goal
    return (
        f'Run the todoflow workflow `{definition.workflow_id}` ("{definition.title}") to its end '
        f"with the todoflow tools.\n\n"
        + (f"The goal: {goal}\n\n" if goal else "")
        + f"Its steps, in order:\n{steps}\n\n"
        + f"Begin with `start` {json.dumps(prepare, ensure_ascii=False)}, then `start` with action "
        "`execute` and the startAttemptId it returns. Then answer each directive with `step` (its "
        "processId and attemptId) until it returns `completed: true`. Do each task for real and "
        "check its expected result before you confirm it; evidence says what you checked.\n\n" + INSTRUCTIONS
    )


def review_run(service: TodoService, process_id: str) -> str:
    """The message a client's model needs to review a run: its card and its log."""
    pid = _process(process_id)
    return (
        f"Review the todoflow run `{pid}`. Say whether each confirmed task's evidence shows its "
        "expected result, which tasks are blocked or failed and why, what the orchestrator "
        "delegated and whether that was right, and what to change in the workflow or its "
        "checklist next time. Its card (status) and its execution log follow.\n\n"
        f"## Card\n\n```json\n{run_card(service, pid)}```\n\n## Log\n\n```text\n{run_log(service, pid)}```\n"
    )
