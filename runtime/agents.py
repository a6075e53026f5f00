"""Agents a driver can ask for replies: a person at a terminal, or a script.

An agent answers a directive with a reply (a mapping the engine validates), with
`Blocked(reason)` (the task is not done: nothing is confirmed and the run stays on
it), or with `Stop()` (no answer now; the run can be resumed).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TextIO

from todoflow.dsl.diagnostics import TodoflowError

from .directive import Directive
from .replies import TELEPORT


class Blocked(NamedTuple):
    reason: str


class Stop(NamedTuple):
    reason: str = "stopped"


Answer = Mapping[str, Any] | Blocked | Stop


class Agent(Protocol):
    stops_on_refusal: bool

    def reply(self, directive: Directive) -> Answer: ...

    def refused(self, reason: str) -> None: ...


class ScriptError(TodoflowError):
    """A replies file that cannot be used."""


class ScriptedAgent:
    """Replies from a list, in order: reply n answers the n-th directive the agent sees.

    The position in the list is the number of agent replies the process has applied,
    so a resumed run picks up where it stopped. A reply may carry `files` (a mapping of
    workspace paths to contents) written before it is sent: the work it reports.
    """

    stops_on_refusal = True

    def __init__(self, replies: list[Mapping[str, Any]], workspace: Path) -> None:
        self.replies, self.workspace = replies, workspace

    @classmethod
    def from_file(cls, path: Path, workspace: Path) -> ScriptedAgent:
        import yaml

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as error:
            raise ScriptError(f"cannot read the replies file {path}: {error}") from error
        replies = data.get("replies") if isinstance(data, dict) else data
        if not isinstance(replies, list) or not all(isinstance(r, dict) for r in replies):
            raise ScriptError(f"{path}: expected a list of replies (or `replies:` holding one)")
        return cls(replies, workspace)

    def reply(self, directive: Directive) -> Answer:
        index = directive.state.agent_replies
        if index >= len(self.replies):
            return Stop(f"the script has no reply {index + 1}")
        reply = dict(self.replies[index])
        if "blocked" in reply:
            return Blocked(str(reply["blocked"]))
        for name, content in (reply.pop("files", None) or {}).items():
            target = self.workspace / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(str(content), encoding="utf-8")
        return reply

    def refused(self, reason: str) -> None:
        """A script cannot correct itself: the driver stops, and the run can be resumed."""


class HumanAgent:
    """A person at a terminal (or at the end of a pipe): plain lines in, plain lines out."""

    stops_on_refusal = False

    def __init__(self, read: TextIO, write: TextIO, editor: str | None = None) -> None:
        self.read, self.write = read, write
        self.editor = editor if editor is not None else os.environ.get("EDITOR")

    def _ask(self, prompt: str) -> str | None:
        self.write.write(prompt)
        self.write.flush()
        line = self.read.readline()
        return None if line == "" else line.rstrip("\n")

    def refused(self, reason: str) -> None:
        self.write.write(f"refused: {reason}\n")

    def reply(self, directive: Directive) -> Answer:
        if directive.node == "intake":
            return self._intake(directive)
        if directive.node == "revise":
            return self._revise(directive)
        return self._work(directive)

    def _work(self, directive: Directive) -> Answer:
        task = directive.task
        assert task is not None
        lines = [f"\n{directive.role}: {task.action}", f"  expected result: {task.expected_result}"]
        lines += [f"  constraint: {c}" for c in task.constraints]
        kind = directive.step.kind if directive.step else ""
        commands = "`revise` to fix the checklist, " if kind == "todo_task" else ""
        lines.append(f"  type the evidence, or {commands}`blocked <reason>`, `quit`")
        self.write.write("\n".join(lines) + "\n")
        answer = self._ask("evidence> ")
        if answer is None or answer.strip() == "quit":
            return Stop()
        if answer.strip() == "revise":
            return {"teleportTo": TELEPORT}
        if answer.startswith("blocked"):
            return Blocked(answer[len("blocked") :].strip() or "blocked")
        outcome = self._ask("outcome> ")
        if outcome is None:
            return Stop()
        return {"evidence": answer, "progress_execution_outcome": outcome}

    def _tasks(self, intro: str) -> list[dict[str, str]] | None:
        self.write.write(intro + "\n  one task per line as `action => expected result`; an empty line ends\n")
        tasks: list[dict[str, str]] = []
        while True:
            line = self._ask(f"task {len(tasks) + 1}> ")
            if line is None:
                return None
            if not line.strip():
                return tasks
            tasks.append(_task(line))

    def _intake(self, directive: Directive) -> Answer:
        goal = directive.step.description or directive.step.title if directive.step else ""
        tasks = self._tasks(f"\nCompose the checklist once, from the goal: {goal}")
        summary = None if tasks is None else self._ask("checklist summary> ")
        if tasks is None or summary is None:
            return Stop()
        return {"tasks": tasks, "progress_checklist_outcome": summary}

    def _revise(self, directive: Directive) -> Answer:
        state = directive.state
        current = [f"{t.action} => {t.expected_result}" for t in state.tasks]
        if self.editor and os.isatty(getattr(self.read, "fileno", lambda: -1)()):
            tasks = self._edit(current)
        else:
            listing = "\n".join(f"  {i}. {line}" for i, line in enumerate(current, start=1))
            tasks = self._tasks(
                f"\nRevise the checklist (the cursor is at task {state.position}):\n{listing}"
            )
        if tasks is None:
            return Stop()
        resume = self._ask(f"resume from task [{state.position}]> ")
        checklist = None if resume is None else self._ask("checklist summary> ")
        work = None if checklist is None else self._ask("work summary> ")
        if resume is None or checklist is None or work is None:
            return Stop()
        return {
            "tasks": tasks,
            "resume_from_task": int(resume) if resume.strip().isdigit() else state.position,
            "progress_checklist_outcome": checklist,
            "progress_execution_outcome": work,
        }

    def _edit(self, lines: list[str]) -> list[dict[str, str]] | None:
        with tempfile.NamedTemporaryFile("w+", suffix=".txt", delete=False, encoding="utf-8") as handle:
            handle.write("# one task per line: action => expected result\n" + "\n".join(lines) + "\n")
        try:
            subprocess.run([*shlex.split(self.editor or "vi"), handle.name], check=False)
            text = Path(handle.name).read_text(encoding="utf-8")
        finally:
            os.unlink(handle.name)
        return [
            _task(line) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
        ]


def _task(line: str) -> dict[str, str]:
    """`action => expected result` as a task."""
    action, _, expected = line.partition("=>")
    return {"action": action.strip(), "expected_result": expected.strip()}
