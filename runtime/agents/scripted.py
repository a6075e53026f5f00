"""Agents a driver can ask for replies: a person at a terminal, or a script.

An agent answers a directive with a reply (a mapping the engine validates: a
confirmation, a teleport, a revision, an orchestrator's decision, a sub-agent's answer
or a todo tool call), with `Blocked(reason)` (the todo is not done: the driver records
that it is blocked and the run stops on it), or with `Stop()` (no answer now; the run
can be resumed). Both agents play every role a run has: the orchestrator at a
todo_task step's work node, and the delegated sub-agent at its `delegated` node.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TextIO

from todoflow.compiler.files import write_atomically
from todoflow.dsl.diagnostics import TodoflowError

from ..directive import Directive
from ..llm_choice import Usage
from ..replies import TELEPORT
from ..workspace import confined


class Blocked(NamedTuple):
    reason: str


class Stop(NamedTuple):
    reason: str = "stopped"


Answer = Mapping[str, Any] | Blocked | Stop


class Agent(Protocol):
    def reply(self, directive: Directive) -> Answer: ...

    def refused(self, reason: str) -> bool:
        """A reply was refused with `reason`: True to be asked again, False to stop."""
        ...

    def applied(self) -> None:
        """The last reply was applied."""
        ...

    def spent(self) -> list[Usage]:
        """The model calls made since last asked (the driver journals them)."""
        ...


class ScriptError(TodoflowError):
    """A replies file that cannot be used."""


class ScriptedAgent:
    """Replies from a list, in order: reply n answers the n-th directive the agent sees.

    The position in the list is the number of agent replies the process has applied
    (a `blocked:` reply is applied too: it marks the todo blocked), so a resumed run
    picks up where it stopped. A reply may carry `files` (a mapping of workspace paths
    to contents) written before it is sent: the work it reports. Paths stay inside the
    workspace, symlinks included. A reply with `expect_refused: TEXT` must be refused
    with a reason containing TEXT (it is sent, refused, and the script goes on); one
    that is applied instead, or any other refusal, stops the run: a script fails loudly
    rather than drift from the run it was written for.
    """

    def __init__(self, replies: list[Mapping[str, Any]], workspace: Path) -> None:
        self.replies, self.workspace = replies, workspace
        # per applied reply: the expected refusals sent before it, then the reply itself
        self.turns: list[list[Mapping[str, Any]]] = [[]]
        for reply in replies:
            self.turns[-1].append(reply)
            if "expect_refused" not in reply:
                self.turns.append([])
        self._turn, self._sent = -1, 0
        self._expecting: str | None = None

    @classmethod
    def from_file(cls, path: Path, workspace: Path) -> ScriptedAgent:
        import yaml

        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as error:
            raise ScriptError(f"cannot read the replies file {path}: {error.strerror or error}") from None
        except UnicodeDecodeError as error:
            raise ScriptError(f"{path} is not UTF-8 text (byte {error.start})") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ScriptError(f"{path} is not YAML: {error}") from None
        replies = data.get("replies") if isinstance(data, dict) else data
        if not isinstance(replies, list) or not all(isinstance(r, dict) for r in replies):
            raise ScriptError(f"{path}: expected a list of replies (or `replies:` holding one)")
        for number, reply in enumerate(replies, start=1):
            _check_files(reply.get("files"), f"{path}: reply {number}")
            if not isinstance(reply.get("expect_refused", ""), str):
                raise ScriptError(
                    f"{path}: reply {number}: `expect_refused` is the text the refusal contains"
                )
        return cls(replies, workspace)

    def reply(self, directive: Directive) -> Answer:
        index = directive.state.agent_replies
        if index >= len(self.turns) or not self.turns[index]:
            return Stop(f"the script has no reply {sum(len(t) for t in self.turns[:index]) + 1}")
        if index != self._turn:
            self._turn, self._sent = index, 0
        turn = self.turns[index]
        reply = dict(turn[min(self._sent, len(turn) - 1)])
        self._sent += 1
        self._expecting = reply.pop("expect_refused", None)
        if "blocked" in reply:
            return Blocked(str(reply["blocked"]))
        for name, content in (reply.pop("files", None) or {}).items():
            self._write(name, content)
        return reply

    def _write(self, name: str, content: Any) -> None:
        target = confined(self.workspace, name)
        if isinstance(target, str):
            raise ScriptError(f"the script writes {target}")
        try:
            write_atomically(target, str(content))
        except OSError as error:
            raise ScriptError(
                f"the script cannot write `{name}` in the workspace: {error.strerror or error}"
            ) from None

    def refused(self, reason: str) -> bool:
        """An expected refusal lets the script go on; any other stops it (resumable once the
        script is fixed): a script cannot correct itself."""
        expected, self._expecting = self._expecting, None
        return expected is not None and expected in reason

    def applied(self) -> None:
        if self._expecting is not None:
            expected, self._expecting = self._expecting, None
            raise ScriptError(
                f"the script expected its reply to be refused ({expected!r}), but it was applied"
            )

    def spent(self) -> list[Usage]:
        return []  # a script calls no model

    def unused(self, directive: Directive) -> int:
        """How many replies are left when the run completes (a script that drifted)."""
        return sum(len(turn) for turn in self.turns[directive.state.agent_replies :])


def _check_files(files: Any, where: str) -> None:
    """`files` is a mapping of plain workspace paths to text."""
    if files is None:
        return
    if not isinstance(files, dict):
        raise ScriptError(f"{where}: `files` maps workspace paths to contents, not {type(files).__name__}")
    for name, content in files.items():
        if not isinstance(name, str) or not name.strip() or "\0" in name:
            raise ScriptError(f"{where}: `files` has a name that is not a path: {name!r}")
        if isinstance(content, dict | list):
            raise ScriptError(
                f"{where}: `files.{name}` is the content of a file, not a {type(content).__name__}"
            )


class HumanAgent:
    """A person at a terminal (or at the end of a pipe): plain lines in, plain lines out.

    Every prompt it shows is listed, with a piped example, in docs/runtime.md."""

    def __init__(self, read: TextIO, write: TextIO, editor: str | None = None) -> None:
        self.read, self.write = read, write
        self.editor = editor if editor is not None else os.environ.get("EDITOR")

    def _ask(self, prompt: str) -> str | None:
        self.write.write(prompt)
        self.write.flush()
        line = self.read.readline()
        return None if line == "" else line.rstrip("\n")

    def refused(self, reason: str) -> bool:
        """The driver has shown the refusal; the same directive is asked again."""
        return True

    def applied(self) -> None:
        """Nothing to check: a person answers what they see."""

    def spent(self) -> list[Usage]:
        return []

    def reply(self, directive: Directive) -> Answer:
        if directive.node == "intake":
            return self._intake(directive)
        if directive.node == "revise":
            return self._revise(directive)
        if directive.node == "delegated":
            return self._sub_agent(directive)
        return self._work(directive)

    def _work(self, directive: Directive) -> Answer:
        task, step = directive.task, directive.step
        assert task is not None and step is not None
        lines = [f"\n{directive.role}: {task.action}", f"  expected result: {task.expected_result}"]
        lines += [f"  constraint: {c}" for c in task.constraints]
        commands = []
        if directive.orchestrated:
            commands.append("`revise` to fix the checklist")
            commands += [f"`delegate {r.id}` ({r.name}: {r.condition})" for r in step.routes]
            if step.generic_agent:
                commands.append("`generic` for the generic agent")
        commands += ["`blocked <reason>`", "`quit`"]
        lines.append("  type the evidence, or " + ", ".join(commands))
        self.write.write("\n".join(lines) + "\n")
        answer = self._ask("evidence> ")
        if answer is None or answer.strip() == "quit":
            return Stop()
        word, _, rest = answer.strip().partition(" ")
        if directive.orchestrated and answer.strip() == "revise":
            return {"teleportTo": TELEPORT}
        if directive.orchestrated and (word == "delegate" or answer.strip() == "generic"):
            return self._delegate(directive, rest.strip() if word == "delegate" else None)
        return self._confirmation(answer)

    def _delegate(self, directive: Directive, route: str | None) -> Answer:
        instructions = self._ask("instructions> ")
        criteria = None if instructions is None else self._ask("success criteria> ")
        if instructions is None or criteria is None:
            return Stop()
        reply: dict[str, Any] = {
            "next_action": "delegate",
            "todo_id_to_execute": directive.todo_id,
            "instructions_to_sub_agent": instructions,
        }
        if criteria.strip():
            reply["success_criteria_for_sub_agent"] = criteria
        if route is None:
            reply["use_generic_agent"] = True
        else:
            reply["selected_route_id"] = route
        return reply

    def _sub_agent(self, directive: Directive) -> Answer:
        self.write.write(f"\n{directive.role}\n{directive.prompt()}")
        self.write.write("  type the evidence, or `failed <reason>`, `blocked <reason>`, `quit`\n")
        answer = self._ask("evidence> ")
        if answer is None or answer.strip() == "quit":
            return Stop()
        word, _, rest = answer.strip().partition(" ")
        if word == "failed":
            return {"failed": rest.strip() or "failed"}
        return self._confirmation(answer)

    def _confirmation(self, answer: str) -> Answer:
        """An answer at a todo that is its evidence (the outcome asked next), or `blocked <reason>`."""
        word, _, rest = answer.strip().partition(" ")
        if word == "blocked":
            return Blocked(rest.strip() or "blocked")
        outcome = self._ask("outcome> ")
        if outcome is None:
            return Stop()
        return {"evidence": answer, "progress_execution_outcome": outcome}

    def _tasks(self, intro: str) -> list[dict[str, str]] | None:
        self.write.write(
            intro + "\n  one task per line as `action => expected result`; an empty line ends, `quit` stops\n"
        )
        tasks: list[dict[str, str]] = []
        while True:
            line = self._ask(f"task {len(tasks) + 1}> ")
            if line is None or line.strip() == "quit":
                return None
            if not line.strip():
                return tasks
            tasks.append(_task(line))

    def _intake(self, directive: Directive) -> Answer:
        goal = directive.step.description or directive.step.title if directive.step else ""
        tasks = self._tasks(f"\nCompose the checklist once, from the goal: {goal}")
        summary = None if tasks is None else self._ask("checklist summary> ")
        if tasks is None or summary is None or summary.strip() == "quit":
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
        resume = self._resume_from(state.position, len(tasks))
        checklist = None if resume is None else self._ask("checklist summary> ")
        work = None if checklist is None else self._ask("work summary> ")
        if resume is None or checklist is None or work is None:
            return Stop()
        return {
            "tasks": tasks,
            "resume_from_task": resume,
            "progress_checklist_outcome": checklist,
            "progress_execution_outcome": work,
        }

    def _resume_from(self, position: int, total: int) -> int | None:
        """`resume from task [N]>`: a number from 1 to one past the last task; empty keeps N."""
        while True:
            answer = self._ask(f"resume from task [{position}]> ")
            if answer is None or answer.strip() == "quit":
                return None
            if not answer.strip():
                return position
            if answer.strip().isdigit() and 1 <= int(answer) <= total + 1:
                return int(answer)
            self.write.write(f"  a task number from 1 to {total + 1} (one past the last task completes)\n")

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
