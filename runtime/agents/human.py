"""A person as the agent: plain lines in, plain lines out (a terminal, or a pipe).

Every prompt it shows is listed, with a piped example, in docs/runtime.md.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..directive import TYPED, Directive
from ..llm_choice import Usage
from ..replies import TELEPORT
from .base import Answer, Blocked, Stop, read_todos


class HumanAgent:
    """A person at a terminal (or at the end of a pipe)."""

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
            commands += _TODO_COMMANDS
        commands += ["`blocked <reason>`", "`quit`"]
        lines.append("  type the evidence, or " + ", ".join(commands))
        self.write.write("\n".join(lines) + "\n")
        answer = (
            self._todo_prompt(directive, ("create", "update"))
            if directive.orchestrated
            else self._ask("evidence> ")
        )
        if isinstance(answer, Mapping):
            return answer
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
        self.write.write(f"\n{directive.role}\n{directive.prompt(TYPED)}")
        self.write.write(
            "  type the evidence, or `failed <reason>`, `update <todo> <status> [notes]`, `list`, "
            "`show <todo>`, `blocked <reason>`, `quit`\n"
        )
        answer = self._todo_prompt(directive, ("update",))
        if isinstance(answer, Mapping):
            return answer
        if answer is None or answer.strip() == "quit":
            return Stop()
        word, _, rest = answer.strip().partition(" ")
        if word == "failed":
            return {"failed": rest.strip() or "failed"}
        return self._confirmation(answer)

    def _todo_prompt(self, directive: Directive, writes: tuple[str, ...]) -> Any:
        """`evidence> ` with the todo tools where they apply: a read is shown and the
        question asked again; a write is the reply (refused by the engine's rules, as any
        other agent's); anything else is the person's answer (None: the input ended)."""
        while True:
            answer = self._ask("evidence> ")
            if answer is None:
                return None
            command = _todo_command(answer, writes)
            if command is None:
                return answer
            if not isinstance(command, tuple):
                return command
            found = read_todos(directive, command[1])
            self.write.write(_shown(found) if not isinstance(found, str) else f"  {found}\n")

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


_TODO_COMMANDS = [
    "`create <title> :: <description>`",
    "`update <todo> <status> [notes]`",
    "`list`",
    "`show <todo>`",
]
_TODO_ID = re.compile(r"todo_\d+")


def _todo_command(line: str, writes: tuple[str, ...]) -> dict[str, Any] | tuple[str, str | None] | None:
    """A todo tool typed at a prompt: a write as its reply, a read as `(tool, todo_id)`,
    None when the line is not one (then it is evidence: `create` needs its `::`, `update`
    and `show` a todo id, so plain words stay evidence)."""
    word, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    if word == "list" and not rest:
        return ("list_todos", None)
    todo, _, more = rest.partition(" ")
    if word == "show" and _TODO_ID.fullmatch(todo) and not more.strip():
        return ("get_todo", todo)
    if word == "create" and "create" in writes and "::" in rest:
        title, _, description = rest.partition("::")
        return {"create_todo": {"title": title.strip(), "description": description.strip()}}
    if word == "update" and "update" in writes and _TODO_ID.fullmatch(todo) and more.strip():
        status, _, notes = more.strip().partition(" ")
        arguments = {"todo_id": todo, "status": status}
        return {"update_todo": arguments | ({"notes": notes.strip()} if notes.strip() else {})}
    return None


def _shown(found: dict[str, Any]) -> str:
    """A todo, or the todos of a step, one line each."""
    listed = found.get("todos", [found])
    return "".join(
        f"  {todo['id']} [{todo['status']}] {todo['title']} => {todo['description']}"
        + (f" ({todo['notes']})" if todo.get("notes") else "")
        + "\n"
        for todo in listed
    )


def _task(line: str) -> dict[str, str]:
    """`action => expected result` as a task."""
    action, _, expected = line.partition("=>")
    return {"action": action.strip(), "expected_result": expected.strip()}
