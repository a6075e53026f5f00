"""The names of the tools an agent is offered beside its decision tools: the one list the
LLM agent offers (through the workspace toolset) and `todoflow plan` shows.

The decision and todo tools depend on the node (`llm.offered`); these do not: every
agent that works — the orchestrator, a route's sub-agent, the generic agent — gets the
workspace tools at every node, `run_command` only when the shell is on (`[tools] shell`
in todoflow.toml, or `--allow-shell`), and the MCP servers' tools as
`mcp__<server>__<tool>`. The names are a contract: models and programs are written
against them.
"""

from __future__ import annotations

from collections.abc import Iterable

WORKSPACE_TOOLS = ("read_file", "write_file", "edit_file", "list_files", "search_files")
SHELL_TOOL = "run_command"


def workspace_tools(shell: bool) -> tuple[str, ...]:
    """The workspace toolset's tools, in the order they are offered."""
    return (*WORKSPACE_TOOLS, SHELL_TOOL) if shell else WORKSPACE_TOOLS


def tools_offered(decisions: Iterable[str], shell: bool, mcp: Iterable[str] = ()) -> tuple[str, ...]:
    """Everything an agent may call at a node: its decision tools, the workspace tools,
    then the MCP servers' tools (already named `mcp__<server>__<tool>`)."""
    return (*decisions, *workspace_tools(shell), *mcp)
