"""The toolsets an LLM agent offers beside its decision tools (`toolbox.Toolset`: the
workspace tools, the MCP servers), routed by name, counted against their bounds and
audited: each call becomes a `ToolUse` the driver journals (a `ToolCalled` entry).

A tool call is not a reply to the engine: it never moves the cursor. Its bounds
(docs/llm.md): `MAX_CALLS_PER_MESSAGE` (the rest of a message's calls are answered "not
run"), `MAX_CALLS_PER_TURN` and `MAX_CALLS_PER_STEP` (the agent stops, resumable), and
`MAX_ARGUMENT_BYTES` (a larger call is refused before anything runs).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from ..llm_choice import ToolUse
from .toolbox import ToolOutcome, Toolset

MAX_CALLS_PER_MESSAGE = 25
MAX_CALLS_PER_TURN = 200  # one directive's tool calls, before a decision
MAX_CALLS_PER_STEP = 1000
MAX_ARGUMENT_BYTES = 2 * 1024 * 1024  # a file's 1 MB content, JSON-escaped, fits
CALL_DEADLINE_S = 610.0  # a tool's own bound (run_command's 600 s at most) ends it first


class Tools:
    """The toolsets of one agent; `reserved`: the decision tools' names, never shadowed."""

    def __init__(self, toolsets: tuple[Toolset, ...], reserved: frozenset[str]) -> None:
        self.toolsets = toolsets
        self._routes: dict[str, Toolset] = {}
        self._specs: list[dict[str, Any]] = []
        for toolset in toolsets:
            for spec in toolset.specs():
                if spec.name in reserved or spec.name in self._routes:
                    continue
                self._routes[spec.name] = toolset
                function = {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": dict(spec.parameters),
                }
                self._specs.append({"type": "function", "function": function})
        self._turn = self._step = 0
        self._step_id: str | None = None

    def specs(self) -> list[dict[str, Any]]:
        return list(self._specs)

    def names(self) -> list[str]:
        return list(self._routes)

    def has(self, name: str) -> bool:
        return name in self._routes

    def begin_turn(self, step_id: str) -> None:
        """A directive's turn starts: its count is afresh, the step's too when it is another step."""
        self._turn = 0
        if step_id != self._step_id:
            self._step_id, self._step = step_id, 0

    def exhausted(self) -> str | None:
        """Why the agent must stop, when a bound on its tool calls is reached."""
        if self._turn >= MAX_CALLS_PER_TURN:
            return f"the model made {MAX_CALLS_PER_TURN} tool calls in one turn without a decision"
        if self._step >= MAX_CALLS_PER_STEP:
            return f"the model made {MAX_CALLS_PER_STEP} tool calls in step `{self._step_id}`"
        return None

    def call(
        self, name: str, arguments: Mapping[str, Any], agent: str, todo: str | None
    ) -> tuple[str, ToolUse]:
        """Run one tool call; what goes back to the model, and its audit record."""
        self._turn += 1
        self._step += 1
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False).encode()
        started = time.perf_counter()
        outcome = self._outcome(name, arguments)
        use = ToolUse(
            agent=agent,
            tool=name,
            todo=todo,
            arguments_sha256=hashlib.sha256(text).hexdigest(),
            arguments_bytes=len(text),
            result_bytes=len(outcome.content.encode()),
            duration_ms=int((time.perf_counter() - started) * 1000),
            refused=outcome.refused,
            detail=dict(outcome.detail),
        )
        return outcome.content, use

    def _outcome(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        try:
            return self._routes[name].call(name, arguments, time.monotonic() + CALL_DEADLINE_S)
        except Exception as error:  # a toolset's own failure is the model's tool result, not a crash
            return ToolOutcome(f"refused: `{name}` failed: {error}", refused=True)

    def close(self) -> None:
        for toolset in self.toolsets:
            toolset.close()


def oversized(raw: Any) -> str | None:
    """Why a tool call's arguments are refused unread: over `MAX_ARGUMENT_BYTES`."""
    size = len(raw.encode()) if isinstance(raw, str) else len(json.dumps(raw, ensure_ascii=False).encode())
    if size > MAX_ARGUMENT_BYTES:
        return f"the arguments are {size:,} bytes; at most {MAX_ARGUMENT_BYTES:,}"
    return None
