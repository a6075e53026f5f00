"""Which model an agent of a step uses: one pure function, the seed's priority.

Standard agents (the orchestrator, a route's sub-agent, the generic agent): the step's
`execution_llm`, then the preset's, then the runtime default. Conditional agents check
the step's `conditional_llm` first. The preset and the default come from the run's
options (`--preset-llm`, `--llm`) or the environment (`TODOFLOW_PRESET_LLM`,
`TODOFLOW_LLM`), as `PROVIDER:MODEL`; docs/runtime.md says which wins.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from todoflow.dsl.nodes import node

from .plan import AgentConfigs, Llm, PlanError

AgentKind = Literal["standard", "conditional"]
PRESET_VARIABLE, DEFAULT_VARIABLE = "TODOFLOW_PRESET_LLM", "TODOFLOW_LLM"


@node
class LlmChoices:
    """The run-wide models below the step's own: the preset's and the runtime default."""

    preset: Llm | None = None
    default: Llm | None = None


@node
class Selection:
    llm: Llm | None  # None: nothing chose a model (a person or a script drives the run)
    rule: str  # the rule that chose it: `step conditional_llm`, `step execution_llm`, `preset`,
    # `default`, or `none`


@node
class Usage:
    """One model call an agent made: journaled by the driver (an `LlmCall` entry)."""

    agent: str  # `orchestrator`, a route id, or `generic`
    llm: Llm
    rule: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int


@node
class ToolUse:
    """One tool call an agent made beside its decisions (a workspace tool, an MCP server's):
    journaled by the driver (a `ToolCalled` entry). The arguments are kept as a digest and
    a size, never whole; `detail` holds a written file and its new sha256, or a command
    line and its exit code."""

    agent: str  # `orchestrator`, a route id, or `generic`
    tool: str
    todo: str | None  # the todo the agent works on, `todo_<N>`
    arguments_sha256: str
    arguments_bytes: int
    result_bytes: int
    duration_ms: int
    refused: bool
    detail: Mapping[str, str | int]


Spent = Usage | ToolUse  # what an agent reports to the driver, in the order it happened


def select_llm(kind: AgentKind, configs: AgentConfigs, choices: LlmChoices) -> Selection:
    if kind == "conditional" and configs.conditional_llm is not None:
        return Selection(configs.conditional_llm, "step conditional_llm")
    if configs.execution_llm is not None:
        return Selection(configs.execution_llm, "step execution_llm")
    if choices.preset is not None:
        return Selection(choices.preset, "preset")
    if choices.default is not None:
        return Selection(choices.default, "default")
    return Selection(None, "none")


def parse_llm(text: str, where: str) -> Llm:
    """`PROVIDER:MODEL` (the model id may itself hold colons: `ollama:qwen3:8b`)."""
    provider, _, model = text.partition(":")
    if not provider.strip() or not model.strip():
        raise PlanError(f"{where}: a model is `PROVIDER:MODEL`, like `openai:gpt-4.1`, not `{text}`")
    return Llm(provider.strip(), model.strip())


def choices_from(
    preset: str | None, default: str | None, environ: Mapping[str, str] = os.environ
) -> LlmChoices:
    """The options given, else the environment's."""
    preset = preset or environ.get(PRESET_VARIABLE) or None
    default = default or environ.get(DEFAULT_VARIABLE) or None
    return LlmChoices(
        parse_llm(preset, "--preset-llm") if preset else None,
        parse_llm(default, "--llm") if default else None,
    )
