"""The driver of `todoflow run`: asks the agent, gives the reply to the engine, shows progress.

It acts for the caller at intake when the step has a ready checklist (passing it on
unchanged), and otherwise only relays. It returns how the run ended: `complete`,
`blocked` or `stopped` (resumable), or `refused` (a script's reply was refused;
resumable once the script is fixed).
"""

from __future__ import annotations

from typing import TextIO

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
        if show_prompts:
            out.write(
                f"--- prompt ({directive.node}, step {directive.state.step_id}) ---\n{directive.prompt()}\n"
            )
        by = "agent"
        if directive.node == "intake" and directive.ready_tasks is not None:
            ready = directive.ready_tasks
            answer: object = {
                "tasks": [{"action": t.action, "expected_result": t.expected_result} for t in ready],
                "progress_checklist_outcome": f"{len(ready)} ordered tasks from the ready checklist",
            }
            by = "caller"
        else:
            answer = agent.reply(directive)
        if isinstance(answer, Blocked):
            out.write(f"blocked: {answer.reason}\nthe run stays on {directive.role}; resume it later\n")
            return "blocked"
        if isinstance(answer, Stop):
            out.write(f"stopped: {answer.reason}\n")
            return "stopped"
        try:
            directive = engine.step(directive.attempt_id, answer, by)  # type: ignore[arg-type]
        except Refusal as refusal:
            out.write(f"refused: {refusal.reason}\n")
            agent.refused(refusal.reason)
            if agent.stops_on_refusal:
                return "refused"
            directive = refusal.directive
            continue
        out.write(_progress_line(directive))
    out.write(card_text(directive))
    return "complete"


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
    return f"{blocks} -> Task {position}/{total}: {state.tasks[position - 1].action}\n"
