"""Pre-flight: what `todoflow run` checks before it creates anything, and `todoflow plan`
lists — one function for both, so a plan that passes is a run that starts.

The checks: the workspace is a folder; the run's models are read (the options, the
environment, then the workflow's todoflow.toml for `--agent llm`); the agent can be made
— a replies file that reads and parses, a model for every agent of every step whose
provider is known and whose key is in the environment. Each failure is a `Problem`
naming its check; `PreflightError` says them all at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from ..llm_choice import LlmChoices, choices_from
from ..plan import RunPlan
from .base import Agent
from .spec import AgentSpec, make_agent

if TYPE_CHECKING:
    from .mcp_servers import McpToolset

Check = Literal["workspace", "models", "agent", "replies", "mcp"]


@node
class Problem:
    check: Check
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


@node
class Preflight:
    """The models the run would use, its agent (None when a problem forbids making it),
    every problem found, the configuration file read (its path and sha256, recorded
    with the run so a resume reads the same; None: none was read), and whether the
    shell (`run_command`) is offered (`[tools] shell` or `--allow-shell`)."""

    llms: LlmChoices
    agent: Agent | None
    problems: tuple[Problem, ...]
    config: tuple[str, str] | None = None
    shell: bool = False


class PreflightError(TodoflowError):
    """Problems that stop a run before anything is created."""

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        lines = "\n  ".join(str(p).replace("\n", "\n  ") for p in problems)
        super().__init__(f"the run cannot start (nothing was created):\n  {lines}")


def preflight(
    spec: AgentSpec,
    plan: RunPlan,
    *,
    workspace: Path,
    config: Path,
    llm: str | None,
    preset_llm: str | None,
    terminal: tuple[TextIO, TextIO],
    config_file: Path | None = None,
    allow_shell: bool = False,
    servers: tuple[McpToolset, ...] = (),
) -> Preflight:
    """The checks `run` makes before it creates a run (`config`: the folder the workflow's
    configuration is found from, `config_file` the file `--config` names instead); the
    MCP `servers` (the caller closes them) are started once the agent is made, their
    tools the model's. Nothing is written, no run made, no model called."""
    problems = []
    if not workspace.is_dir():
        shown = "is not a folder" if workspace.exists() else "does not exist"
        problems.append(Problem("workspace", f"the workspace {workspace} {shown}"))
    try:
        llms, read, shell = _models(spec, config, config_file, llm, preset_llm)
    except TodoflowError as error:
        return Preflight(LlmChoices(), None, (*problems, Problem("models", error.render())))
    try:
        made = make_agent(
            spec,
            plan,
            llms,
            workspace=workspace,
            config=config,
            terminal=terminal,
            config_file=config_file,
            allow_shell=allow_shell,
            toolsets=servers,
        )
    except TodoflowError as error:
        found = (*problems, Problem(_check(error), error.render()))
        return Preflight(llms, None, found, read, shell or allow_shell)
    problems += _started(servers)
    return Preflight(llms, made, tuple(problems), read, shell or allow_shell)


def _started(servers: tuple[McpToolset, ...]) -> list[Problem]:
    """Each server started and listed; one that does not is a problem (`mcp`)."""
    problems = []
    for each in servers:
        try:
            each.start()
        except TodoflowError as error:
            problems.append(Problem("mcp", error.render()))
    return problems


def _models(
    spec: AgentSpec, config: Path, config_file: Path | None, llm: str | None, preset_llm: str | None
) -> tuple[LlmChoices, tuple[str, str] | None, bool]:
    """The run's preset and default models: the options, then the environment, and for the
    LLM agent the workflow's configuration too (the file read: its path and sha256; and
    whether it turns the shell on)."""
    if spec.kind != "llm":
        return choices_from(preset_llm, llm), None, False
    from .llm_config import load_config

    loaded = load_config(config, llm, preset_llm, file=config_file)
    source = loaded.source
    read = (str(source.path), source.sha256) if source.path and source.sha256 else None
    return loaded.choices, read, loaded.tools.shell


def _check(error: TodoflowError) -> Check:
    from .llm_config import LlmConfigError
    from .mcp_servers import McpError
    from .scripted import ScriptError

    if isinstance(error, ScriptError):
        return "replies"
    if isinstance(error, McpError):  # the LLM agent lists its servers' tools when it is made
        return "mcp"
    return "models" if isinstance(error, LlmConfigError) else "agent"


def mcp_tools(config: Path, config_file: Path | None = None) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """`--check-mcp`: the tools of the MCP servers the workflow's configuration (found from
    `config`, or `config_file`) names, each server started, listed and stopped, its tools
    named `mcp__<server>__<tool>`; a server that does not start or list is a problem (`mcp`)."""
    from .mcp_servers import configured

    try:
        servers = configured(config, config_file)
    except TodoflowError as error:
        return (), (Problem("mcp", error.render()),)
    try:
        problems = _started((servers,))
        return (() if problems else tuple(spec.name for spec in servers.specs())), tuple(problems)
    finally:
        servers.close()
