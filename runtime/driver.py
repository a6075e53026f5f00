"""The driver of `todoflow run`: asks the agent, gives the reply to the engine, shows progress.

It acts for the caller at intake when the step has a ready checklist (passing it on
unchanged), records a blocked todo as the agent's `update_todo` (so the run says it is
blocked and a script resumes after the block), and otherwise only relays. It returns
how the run ended: `complete`, `blocked` or `stopped` (resumable), or `refused` (a
script's reply was refused; resumable once the script is fixed).
"""

from __future__ import annotations

from typing import Any, TextIO

from .agents import Agent, Blocked, Stop
from .card import card_text
from .directive import Directive
from .engine import Engine, Refusal


def drive(engine: Engine, agent: Agent, out: TextIO, show_prompts: bool = False) -> str:
    """Run until the workflow completes or the agent stops; `show_prompts` prints each
    directive's rendered prompt (what an LLM agent would read) before the agent answers."""
    directive = engine.directive()
    out.write(card_text(directive))
    while not directive.completed:
        if directive.blocked is not None:
            out.write(f"blocked: {directive.blocked}\n")
            return "blocked"
        if show_prompts:
            out.write(
                f"--- prompt ({directive.node}, step {directive.state.step_id}) ---\n{directive.prompt()}\n"
            )
        by = "agent"
        if directive.node == "intake" and directive.ready_tasks is not None:
            ready = directive.ready_tasks
            answer: Any = {
                "tasks": [{"action": t.action, "expected_result": t.expected_result} for t in ready],
                "progress_checklist_outcome": f"{len(ready)} ordered tasks from the ready checklist",
            }
            by = "caller"
        else:
            answer = agent.reply(directive)
        if isinstance(answer, Stop):
            out.write(f"stopped: {answer.reason}\n")
            return "stopped"
        blocked = answer if isinstance(answer, Blocked) else None
        if blocked is not None and directive.todo_id is None:  # no todo to mark: just stop
            out.write(f"blocked: {blocked.reason}\nthe run stays on {directive.role}; resume it later\n")
            return "blocked"
        if blocked is not None:
            answer = _block(directive, blocked.reason)
        try:
            directive = engine.step(directive.attempt_id, answer, by)
        except Refusal as refusal:
            out.write(f"refused: {refusal.reason}\n")
            if not agent.refused(refusal.reason):
                return "refused"
            directive = refusal.directive
            continue
        agent.applied()
        if blocked is not None:
            out.write(f"blocked: {blocked.reason}\nthe run stays on {directive.role}; resume it later\n")
            return "blocked"
        out.write(_progress_line(directive))
    out.write(card_text(directive))
    return "complete"


def _block(directive: Directive, reason: str) -> dict[str, Any]:
    """The agent's block as its update_todo: the todo is marked blocked, with the reason."""
    notes = reason[:500] if reason.strip() else "blocked"
    return {"update_todo": {"todo_id": directive.todo_id, "status": "blocked", "notes": notes}}


def _progress_line(directive: Directive) -> str:
    state = directive.state
    if state.finished:
        return "-> complete: result {}\n"
    if state.node == "intake":
        return f"[{state.step_id}] Checklist: waiting for the checklist\n"
    position, total = state.position, state.total
    blocks = f"[{state.step_id}] Checklist {position - 1}/{total} -> Prepare {position}/{total}"
    if state.node == "revise":
        return f"{blocks} -> Revise checklist\n"
    if state.node == "delegated":
        return f"{blocks} -> {directive.role}\n"
    returned = state.returned
    if returned is not None and returned.seq == state.seq and not returned.passed:
        failed = f"[{state.step_id}] {returned.agent} gave todo_{returned.position} back: {returned.reason}\n"
        return failed + f"{blocks} -> Task {position}/{total}: {state.tasks[position - 1].action}\n"
    return f"{blocks} -> Task {position}/{total}: {state.tasks[position - 1].action}\n"
