"""The driver of `todoflow run`: asks the agent, gives the reply to the engine, shows progress.

It acts for the caller at intake when the step has a ready checklist (passing it on
unchanged), records a blocked todo as the agent's `update_todo` (so the run says it is
blocked and a script resumes after the block), and otherwise only relays. It returns
how the run ended (`Ending`): `complete`, `blocked` or `stopped` (resumable), or
`refused` (a script's reply was refused; resumable once the script is fixed), with why.
Before anything else it kills what a killed runner left running of the run's commands,
and it journals each command the agent starts as it starts (`commands.py`).

`stopped_by_signals` makes SIGTERM and SIGHUP stop a run as SIGINT does: by an exception
that unwinds through every `finally`, so a command still running is killed with its
process group, the MCP servers and the journal are closed, and the run resumes.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from ..directive import Directive
from ..engine import Engine, Refusal
from ..views.card import card_text
from . import commands, fast_path, process_groups
from .base import Agent, Blocked, OffersTools, Stop

if TYPE_CHECKING:
    from ..state import Returned

PREVALIDATION_FAILED = "prevalidation failed: "  # how workspace.checked words a failed one


class Ending(str):
    """How a drive ended — `complete`, `blocked`, `stopped` or `refused`, compared as that
    word — and why, in the words the driver printed (None: complete, or no reason given)."""

    reason: str | None

    def __new__(cls, kind: str, reason: str | None = None) -> Ending:
        made = super().__new__(cls, kind)
        made.reason = reason
        return made


def drive(
    engine: Engine,
    agent: Agent,
    out: TextIO,
    show_prompts: bool = False,
    fast_path_only: bool = False,
    observe: Callable[[], None] | None = None,
) -> Ending:
    """Run until the workflow completes or the agent stops; `show_prompts` prints each
    directive's rendered prompt (what an LLM agent would read) before the agent answers.
    A learn_code step tries its fast path first (`fast_path_only`: and nothing else).
    `observe` is called after each turn of the loop (a live trace looks at the journal).
    First of all, what is left of a command a killed runner left running is killed."""
    commands.stop_left(engine, out)
    journal = commands.Journal(engine)
    if isinstance(agent, OffersTools):
        agent.on_command(journal.started)
    directive = engine.directive()
    out.write(card_text(directive))
    while not directive.completed:
        if observe is not None:
            observe()
        fast = _fast_path(engine, agent, journal, directive, out, fast_path_only)
        if fast is not None:
            directive = fast
            continue
        if directive.blocked is not None:
            out.write(f"blocked: {directive.blocked}\n")
            return Ending("blocked", directive.blocked)
        if show_prompts:
            _show_prompt(directive, agent, out)
        journal.asking(directive)
        answer, by = _answer(directive, agent)
        usage = agent.spent()
        if isinstance(answer, Stop):
            if usage:
                engine.record_usage(journal.attempt, usage)
            out.write("stopped\n" if answer == Stop() else f"stopped: {answer.reason}\n")  # `quit`: once
            return Ending("stopped", None if answer == Stop() else answer.reason)
        blocked = answer if isinstance(answer, Blocked) else None
        if blocked is not None and directive.todo_id is None:  # no todo to mark: just stop
            out.write(f"blocked: {blocked.reason}\nthe run stays on {directive.role}; resume it later\n")
            return Ending("blocked", blocked.reason)
        if blocked is not None:
            answer = _block(directive, blocked.reason)
        try:
            directive = engine.step(journal.attempt, answer, by, usage)
        except Refusal as refusal:
            out.write(f"refused: {refusal.reason}\n")
            if not agent.refused(refusal.reason):
                return Ending("refused", refusal.reason)
            directive = refusal.directive
            continue
        agent.applied()
        if blocked is not None:
            out.write(f"blocked: {blocked.reason}\nthe run stays on {directive.role}; resume it later\n")
            return Ending("blocked", blocked.reason)
        out.write(_progress_line(directive))
    out.write(card_text(directive))
    return Ending("complete")


STOPPING = (signal.SIGTERM, signal.SIGHUP)  # besides SIGINT, which Python raises already


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """While it lasts, SIGTERM or SIGHUP raises `SystemExit(128 + signal)` where the run
    is (a process killed by the signal would leave its commands running, their group
    no longer anyone's). Further ones are ignored while the run unwinds: SIGKILL is the
    stop that does not wait. A signal the process was started ignoring (`nohup`) stays
    ignored. Ctrl-C raises KeyboardInterrupt as Python's own handler does. Each waits
    while a command's process group is being started (`process_groups.starting`), so
    the unwinding finds it to kill. Only the main thread can take a signal; elsewhere it
    does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        number: signal.signal(number, _stop)
        for number in STOPPING
        if signal.getsignal(number) not in (signal.SIG_IGN, None)  # None: C code's own handler
    }
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not a handler of the caller's
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _stop(number: int, _: FrameType | None) -> None:
    for each in STOPPING:
        signal.signal(each, signal.SIG_IGN)
    process_groups.stop(functools.partial(_exit, 128 + number))


def _exit(status: int) -> None:
    raise SystemExit(status)


def _interrupt(number: int, _: FrameType | None) -> None:
    process_groups.stop(_interrupted)


def _interrupted() -> None:
    raise KeyboardInterrupt


def _show_prompt(directive: Directive, agent: Agent, out: TextIO) -> None:
    """The directive's rendered prompt, and the tools an agent that offers them would give."""
    out.write(f"--- prompt ({directive.node}, step {directive.state.step_id}) ---\n{directive.prompt()}\n")
    if isinstance(agent, OffersTools):
        out.write(f"{agent.offered_tools(directive)}\n")


def _answer(directive: Directive, agent: Agent) -> tuple[Any, str]:
    """The reply and who gives it: the caller's own when the directive has one ready (the
    ready checklist passed on), else the agent's."""
    ready = directive.ready_reply()
    return (ready, "caller") if ready is not None else (agent.reply(directive), "agent")


def _fast_path(
    engine: Engine,
    agent: Agent,
    journal: commands.Journal,
    directive: Directive,
    out: TextIO,
    fast_path_only: bool,
) -> Directive | None:
    """At a learn_code step not tried yet: its intake, then the fast path; the directive
    after it (the next step, or the step afresh). None: no fast path is due (`directive`
    still stands). A `fast_path_only` run has no fallback: a failed fast path is tried
    again (after the script is fixed) each time the run is resumed."""
    step, current = fast_path.due(engine, directive, fast_path_only)
    if step is None:
        return None if current is directive else current
    out.write(_progress_line(current))
    fast_path.run(engine, step, _sub_agent(agent, journal, out), out, fast_path_only)
    return engine.directive()


def _sub_agent(agent: Agent, journal: commands.Journal, out: TextIO) -> fast_path.SubAgent:
    """The run's agent as the sub-agent of a fast path's delegation, until it is answered."""

    def answer(engine: Engine, directive: Directive) -> Directive:
        while directive.node == "delegated":
            journal.asking(directive)
            reply = agent.reply(directive)
            usage = agent.spent()
            if isinstance(reply, Stop | Blocked):
                if usage:  # what the model spent is journaled, answer or not
                    engine.record_usage(journal.attempt, usage)
                out.write(f"the sub-agent gave up: {reply.reason}\n")
                raise fast_path.GaveUp(f"the sub-agent gave no answer: {reply.reason}")
            try:
                directive = engine.step(journal.attempt, reply, "agent", usage)
            except Refusal as refusal:
                out.write(f"refused: {refusal.reason}\n")
                if not agent.refused(refusal.reason):
                    raise fast_path.GaveUp(f"the sub-agent's answer was refused: {refusal.reason}") from None
                directive = refusal.directive
                continue
            agent.applied()
            out.write(_progress_line(directive))
        return directive

    return answer


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
        return (
            _returned_line(state.step_id, returned)
            + f"{blocks} -> Task {position}/{total}: {state.tasks[position - 1].action}\n"
        )
    return f"{blocks} -> Task {position}/{total}: {state.tasks[position - 1].action}\n"


def _returned_line(step_id: str | None, returned: Returned) -> str:
    """A delegation that came back: prevalidation said no (the route's expected files), or
    the sub-agent gave the todo back (`failed`)."""
    todo = f"todo_{returned.position}"
    reason = returned.reason or ""
    if reason.startswith(PREVALIDATION_FAILED):
        why = reason.removeprefix(PREVALIDATION_FAILED)
        return f"[{step_id}] prevalidation failed for {todo} (route {returned.agent}): {why}\n"
    return f"[{step_id}] {returned.agent} gave {todo} back: {reason}\n"
