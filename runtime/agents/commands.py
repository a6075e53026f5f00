"""The shell commands of a run in its journal: each journaled as it starts
(`CommandStarted`), and what a killed runner left running killed when the run resumes.

A command's `ToolCalled` is journaled with the reply of the turn that ran it, after the
call has ended; a runner killed by SIGKILL (or a machine's hard stop) while a command
runs never writes it, and the command's process group lives on with no time limit, in
the workspace the resumed run works in. So the driver journals each start at once
(`Journal.started`, which the agent's shell calls), and a resumed run first kills the
groups of starts with no `run_command` call journaled after them, where their runner
was a process of this machine that has ended (`stop_left`; `process_groups` says what
is and is not guaranteed against a process id given to another process since).

The start moves the journal on, so the attempt the agent's turn answers with is the one
after its own starts (`Journal.attempt`).
"""

from __future__ import annotations

from typing import TextIO

from ..directive import Directive
from ..engine import Engine
from ..entries import CommandStarted, Entry, ToolCalled
from ..orchestrator import working_agent
from . import process_groups
from .offer import SHELL_TOOL


class Journal:
    """The driver's record of the commands an agent starts while it answers a directive."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._asked: Directive | None = None
        self.attempt = ""

    def asking(self, directive: Directive) -> None:
        """The agent is asked `directive`: its answer goes with this attempt, or the one
        after the commands it starts meanwhile."""
        self._asked, self.attempt = directive, directive.attempt_id

    def started(self, command: str, group: int) -> None:
        """A command started in process group `group`: journaled now, before it ends."""
        asked = self._asked
        assert asked is not None, "a command starts while the agent answers a directive"
        leader = process_groups.leader(group)
        after = self.engine.journal(
            self.attempt,
            lambda seq, at: CommandStarted(
                seq=seq,
                at=at,
                by="driver",
                step=asked.state.step_id or "",
                agent=working_agent(asked.state),
                todo=asked.todo_id,
                command=command,
                runner=process_groups.this_runner(),
                group=group,
                leader=leader,
            ),
        )
        self.attempt = after.attempt_id


def stop_left(engine: Engine, out: TextIO) -> None:
    """Kill what is left of the commands the journal says were running when their runner,
    a process of this machine, died; each one killed is said on `out`."""
    for started in left_running(engine.store.entries()):
        if process_groups.ended_here(engine.store, started.runner) and process_groups.kill_left(
            started.group, started.leader
        ):
            out.write(
                f"[{started.step}] killed what was left of `{started.command}` (process group "
                f"{started.group}), left running by {started.runner}\n"
            )


def left_running(entries: list[Entry]) -> list[CommandStarted]:
    """The commands started with no `run_command` call journaled after them. A run's
    commands run one at a time, and a turn's calls are journaled once all of them have
    ended, so a later call means every earlier command had ended (its group killed)."""
    started: list[CommandStarted] = []
    for entry in entries:
        if isinstance(entry, CommandStarted):
            started.append(entry)
        elif isinstance(entry, ToolCalled) and entry.tool == SHELL_TOOL:
            started.clear()
    return started
