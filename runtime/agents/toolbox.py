"""The tools an agent may call beside its decision tools, whoever provides them.

A `Toolset` is one provider of such tools: the workspace tools and the shell
(`runtime/agents/workspace_tools.py`), or the MCP servers a run configures
(`runtime/agents/mcp_servers.py`, named `mcp__<server>__<tool>`). The LLM agent offers
every toolset's specs next to the decision tools and sends each call to the toolset
that named it. A tool call is not a reply to the engine: it never moves the cursor.
Its outcome is text for the model plus what the audit records (`ToolCalled`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model sees it: OpenAI's function name, description, JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ToolOutcome:
    """What a call did. `content` goes back to the model as the tool result; `refused`
    says nothing was done (a one-line reason in `content`); `detail` holds what the audit
    records beyond sizes and durations (a file and its new sha256, a command and its exit
    code), already free of secrets."""

    content: str
    refused: bool = False
    detail: Mapping[str, str | int] = field(default_factory=dict)


class Toolset(Protocol):
    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools offered, in a stable order."""
        ...

    def call(self, name: str, arguments: Mapping[str, Any], deadline: float) -> ToolOutcome:
        """Runs one of `specs()`'s tools; `deadline` is a `time.monotonic()` value it ends by.
        Bad arguments or a refused path are an outcome with `refused=True`, never a raise."""
        ...

    def close(self) -> None:
        """Releases what the toolset holds (processes, connections); idempotent."""
        ...


Started = Callable[[str, int], None]  # a command line and its process group, told as it starts


@runtime_checkable
class StartsCommands(Protocol):
    """A toolset that starts commands which could outlive its runner (the shell)."""

    def on_start(self, started: Started) -> None:
        """From now on, tell `started` of each command as it starts (the driver journals it)."""
        ...
