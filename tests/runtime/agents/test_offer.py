"""The tools every agent is offered beside its decision tools: names models and programs
are written against (issue 22's contract), in the order they are offered."""

from __future__ import annotations

from pathlib import Path

from todoflow.runtime.agents.offer import tools_offered, workspace_tools
from todoflow.runtime.agents.workspace_tools import WorkspaceTools


def test_the_workspace_tools_are_the_contract_s_names() -> None:
    names = ("read_file", "write_file", "edit_file", "list_files", "search_files")
    assert workspace_tools(shell=False) == names
    assert workspace_tools(shell=True) == (*workspace_tools(shell=False), "run_command")


def test_an_agent_is_offered_its_decisions_then_the_workspace_then_mcp() -> None:
    offered = tools_offered(["complete_todo"], shell=False, mcp=["mcp__tickets__find"])
    assert offered == ("complete_todo", *workspace_tools(shell=False), "mcp__tickets__find")


def test_the_workspace_toolset_offers_exactly_those_names(tmp_path: Path) -> None:
    for shell in (False, True):
        offered = tuple(spec.name for spec in WorkspaceTools(tmp_path, shell=shell).specs())
        assert offered == workspace_tools(shell)
