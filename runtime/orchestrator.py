"""The orchestrator's rules: what a decision, a todo tool call or a sub-agent's reply may
do at a todo_task step, and the journal entry each becomes.

The checklist rules stay the authority over positions, confirmations and revisions
(`engine`); here are the orchestrator's: a delegation names the current todo and exactly
one agent the step allows, `complete` only when nothing is left, the todo tools touch
only what they may, a route's sub-agent passes prevalidation before its todo counts as
done, and a step's orchestrator turns are bounded by `execution_max_turns`. Every
refusal raises `InvalidReply` naming the field and the rule; nothing changes.
"""

from __future__ import annotations

from todoflow.compiler.checklist import MAX_TASKS

from .entries import (
    GENERIC,
    ORCHESTRATOR,
    Confirm,
    Continue,
    CreateTodo,
    Delegate,
    Entry,
    Head,
    SubAgentDone,
    SubAgentFailed,
    UpdateTodo,
)
from .plan import RunStep
from .replies import (
    CompleteReply,
    CompleteTodoReply,
    ContinueReply,
    CreateTodoReply,
    DelegateReply,
    InvalidReply,
    SubAgentFailedReply,
    UpdateTodoReply,
    WorkReply,
)
from .state import ProcessState, turns_allowed
from .workspace import Files


def todo_id(position: int) -> str:
    return f"todo_{position}"


def learn_code(step: RunStep) -> bool:
    """A step whose fast path is tried first: `declared_execution_mode` learn_code and at
    least one route (checked mechanically, as the seed says)."""
    return (
        step.kind == "todo_task"
        and step.configs.declared_execution_mode == "learn_code"
        and bool(step.routes)
    )


def script_only(step: RunStep, state: ProcessState, fast_path_only: bool) -> str | None:
    """Why an agent may not act at this node because the step's learn_code script has it:
    its intake is the runner's, before the script; while the script runs, only its
    delegations are answered; a `fast_path_only` run has no orchestrator at such a step."""
    if not learn_code(step) or state.node == "delegated":
        return None
    script = f"learnings/{step.id}/main.py"
    if state.fast_path == "running":
        return (
            f"step `{step.id}` is orchestrated by its learn_code script ({script}) now: answer its "
            "delegations as they come (`status` shows the current directive)"
        )
    if fast_path_only:
        return (
            f"the run is fast_path_only: step `{step.id}` is orchestrated by {script} only, never by "
            "an agent; fix the script, then resume the run (or call `status`) to try it again"
        )
    if state.node == "intake" and state.fast_path is None:
        return (
            f"step `{step.id}` starts with its learn_code script: the runner passes its checklist on "
            "and runs the script (resume the run, or call `status`)"
        )
    return None


def out_of_turns(step: RunStep, state: ProcessState, process_id: str) -> str | None:
    """Why the orchestrator may take no more turns in this step, or None; the command it
    names is the one that goes on when pasted (this run, a bound it has not used yet)."""
    raised = raised_bound(step, state)
    if raised is None:
        return None
    allowed = turns_allowed(step, state)
    return (
        f"step `{step.id}` has used all {allowed} of its orchestrator turns (execution_max_turns {allowed}); "
        f"raise the bound to go on: `todoflow run --resume {process_id} --max-turns {raised}`"
    )


def raised_bound(step: RunStep, state: ProcessState) -> int | None:
    """The bound a step out of turns may go on with (twice the one it used up), or None
    when it is not out of turns."""
    allowed = turns_allowed(step, state)
    if allowed is None or state.turns < allowed or state.node not in ("work", "revise"):
        return None
    return max(2 * allowed, state.turns + 1)


def decision(
    head: Head, step: RunStep, state: ProcessState, reply: DelegateReply | ContinueReply | CompleteReply
) -> Entry:
    """The entry of an orchestrator's TodoTaskResponse at the work node."""
    if isinstance(reply, CompleteReply):
        remaining = state.total - state.position + 1
        raise InvalidReply(
            f"next_action `complete` is refused: {remaining} of {state.total} todos are not confirmed yet "
            f"({todo_id(state.position)} is current); confirm or delegate them, and the step completes "
            "by itself after the last"
        )
    if isinstance(reply, ContinueReply):
        return Continue(
            **head,
            position=state.position,
            selection_reasoning=reply.selection_reasoning,
            progress_summary=reply.progress_summary,
            all_tasks_complete=reply.all_tasks_complete,
        )
    _check_current(reply.todo_id_to_execute, state, "todo_id_to_execute")
    route_id = reply.selected_route_id or None  # an empty string is no route
    if route_id is not None and reply.use_generic_agent:
        raise InvalidReply("give selected_route_id or use_generic_agent: true, not both")
    if route_id is None and not reply.use_generic_agent:
        raise InvalidReply(
            "a delegation needs selected_route_id (a route of this step) or use_generic_agent: true"
        )
    if route_id is not None and step.route(route_id) is None:
        known = ", ".join(f"`{r.id}`" for r in step.routes) or "none"
        raise InvalidReply(
            f"selected_route_id `{route_id}` is not a route of step `{step.id}` (routes: {known})"
        )
    if reply.use_generic_agent and not step.generic_agent:
        raise InvalidReply(
            f"step `{step.id}` does not allow the generic agent (`generic off`); choose a route"
        )
    return Delegate(
        **head,
        position=state.position,
        selected_route_id=route_id,
        use_generic_agent=reply.use_generic_agent,
        instructions_to_sub_agent=reply.instructions_to_sub_agent,
        success_criteria_for_sub_agent=reply.success_criteria_for_sub_agent,
        selection_reasoning=reply.selection_reasoning,
        progress_summary=reply.progress_summary,
        all_tasks_complete=reply.all_tasks_complete,
    )


def sub_agent(
    head: Head, step: RunStep, state: ProcessState, reply: WorkReply | SubAgentFailedReply, files: Files
) -> Entry:
    """The entry of the delegated sub-agent's answer: done (prevalidated for a route) or failed."""
    delegation = state.delegation
    assert delegation is not None
    if isinstance(reply, SubAgentFailedReply):
        return SubAgentFailed(
            **head, position=delegation.position, agent=delegation.agent, failed=reply.failed
        )
    return _done(head, step, state, reply.evidence, reply.progress_execution_outcome, files)


def _done(head: Head, step: RunStep, state: ProcessState, evidence: str, outcome: str, files: Files) -> Entry:
    delegation = state.delegation
    assert delegation is not None
    route = step.route(delegation.agent)
    checked = files.prevalidate(route.step.expected_files) if route is not None else None
    return SubAgentDone(  # the generic agent's: no prevalidation, no learning
        **head,
        position=delegation.position,
        agent=route.id if route is not None else GENERIC,
        evidence=evidence,
        progress_execution_outcome=outcome,
        passed=checked.passed if checked is not None else True,
        reason=checked.reason if checked is not None else None,
        files=checked.files if checked is not None else (),
    )


def working_agent(state: ProcessState) -> str:
    """Who works at `state`: the delegated sub-agent (its route id), or the orchestrator."""
    delegation = state.delegation
    return delegation.agent if state.node == "delegated" and delegation is not None else ORCHESTRATOR


def tool(
    head: Head,
    step: RunStep,
    state: ProcessState,
    reply: CreateTodoReply | UpdateTodoReply | CompleteTodoReply,
    files: Files,
) -> Entry:
    """The entry of a todo tool call (`create_todo`, `update_todo`, `complete_todo`)."""
    delegated = state.node == "delegated"
    agent = working_agent(state)
    if isinstance(reply, CreateTodoReply):
        if step.kind != "todo_task":
            raise InvalidReply(
                f"create_todo: step `{step.id}` is a regular step, one task; it takes no todos"
            )
        if state.total >= MAX_TASKS:
            raise InvalidReply(f"create_todo: the checklist holds {state.total} tasks; at most {MAX_TASKS}")
        return CreateTodo(**head, title=reply.title, description=reply.description, priority=reply.priority)
    if isinstance(reply, CompleteTodoReply):
        _check_current(reply.todo_id, state, "todo_id", delegated)
        if delegated:
            return _done(head, step, state, reply.evidence, reply.result, files)
        return Confirm(
            **head, position=state.position, evidence=reply.evidence, progress_execution_outcome=reply.result
        )
    position = _position(reply.todo_id, state)
    if delegated and position != state.position:
        raise InvalidReply(
            f"todo_id `{reply.todo_id}` is not yours: "
            f"a sub-agent updates only its own todo, {todo_id(state.position)}"
        )
    if position < state.position:
        raise InvalidReply(f"todo_id `{reply.todo_id}` is completed; update_todo changes open todos only")
    if reply.status is None and reply.notes is None:
        raise InvalidReply(
            "update_todo changes `status` (in_progress or blocked) or `notes`; it was given neither"
        )
    return UpdateTodo(**head, position=position, status=reply.status, notes=reply.notes, agent=agent)


def _position(given: str, state: ProcessState) -> int:
    position = int(given.removeprefix("todo_"))
    if position > state.total:
        raise InvalidReply(f"there is no `{given}`: the checklist holds todo_1 to {todo_id(state.total)}")
    return position


def _check_current(given: str, state: ProcessState, field: str, own: bool = False) -> None:
    position = _position(given, state)
    if position != state.position:
        whose = "the delegated todo" if own else "the current todo"
        raise InvalidReply(f"{field} is `{given}`; {whose} is {todo_id(state.position)}")
