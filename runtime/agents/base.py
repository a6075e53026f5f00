"""What a driver asks of an agent, whoever plays it: a person, a script, a model.

An agent answers a directive with a reply (a mapping the engine validates: a
confirmation, a teleport, a revision, an orchestrator's decision, a sub-agent's answer
or a todo tool call), with `Blocked(reason)` (the todo is not done: the driver records
that it is blocked and the run stops on it), or with `Stop()` (no answer now; the run
can be resumed). Every agent plays every role a run has: the orchestrator at a
todo_task step's work node, and the delegated sub-agent at its `delegated` node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..directive import Directive
from ..events import todos
from ..llm_choice import Spent
from .toolbox import Started


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

    def spent(self) -> Sequence[Spent]:
        """The model and tool calls made since last asked (the driver journals them)."""
        ...


@runtime_checkable
class OffersTools(Protocol):
    """An agent that calls tools (the LLM agent): what it is offered at a directive, and
    its toolsets released when the run stops."""

    def offered_tools(self, directive: Directive) -> str:
        """`tools: [...]`, after `todo: todo_<N>` when the directive has a todo."""
        ...

    def close(self) -> None:
        """Releases its toolsets (a command still running is killed with its group)."""
        ...

    def on_command(self, started: Started) -> None:
        """Each command its toolsets start is told to `started` as it starts."""
        ...


def read_todos(directive: Directive, todo_id: str | None = None) -> dict[str, Any] | str:
    """What `list_todos` (no `todo_id`) or `get_todo` reads, as todos.json holds it, or
    why there is nothing to read: an agent answers its reads itself, nothing is journaled."""
    if directive.step is None or not directive.state.tasks:
        return "there is no checklist to read yet"
    listed: dict[str, Any] = json.loads(todos(directive.step, directive.state))
    if todo_id is None:
        return listed
    found = next((todo for todo in listed["todos"] if todo["id"] == todo_id), None)
    return found if found is not None else f"there is no `{todo_id}` in step `{listed['step_id']}`"
