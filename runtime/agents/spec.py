"""What drives a run, as a typed value: parsed once from `--agent` (or a run's meta),
recorded in the run's meta as its text, and made into an agent by `make_agent`.

The forms: `human` (a person at the terminal, the default), `scripted:REPLIES.yaml` (a
script; recorded with the file's resolved path, so a resume from another folder finds
it), `llm` (a model through the providers of the workflow's todoflow.toml), `mcp` (an
MCP client drives the run through `todoflow serve`; no agent of ours).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TextIO

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from ..llm_choice import LlmChoices
from ..plan import RunPlan
from .base import Agent
from .toolbox import Toolset

Kind = Literal["human", "scripted", "llm", "mcp"]
FORMS = "`human` (the default), `scripted:REPLIES.yaml`, `llm` or `mcp`"


class AgentError(TodoflowError):
    """An agent that cannot drive the run, said before anything is created."""


@node
class AgentSpec:
    kind: Kind
    script: Path | None = None  # `scripted`: the replies file, resolved

    @staticmethod
    def parse(text: str) -> AgentSpec:
        """`human`, `llm`, `mcp` or `scripted:FILE` (the file resolved against the working folder)."""
        if text in ("human", "llm", "mcp"):
            return AgentSpec(text)  # type: ignore[arg-type]
        if text.startswith("scripted:") and text.removeprefix("scripted:"):
            return AgentSpec("scripted", Path(text.removeprefix("scripted:")).resolve())
        raise AgentError(f"unknown agent `{text}`; use {FORMS}")

    def __str__(self) -> str:
        return f"scripted:{self.script}" if self.kind == "scripted" else self.kind


def make_agent(
    spec: AgentSpec,
    plan: RunPlan,
    llms: LlmChoices,
    *,
    workspace: Path,
    config: Path,
    terminal: tuple[TextIO, TextIO],
    config_file: Path | None = None,
    allow_shell: bool = False,
    toolsets: tuple[Toolset, ...] = (),
) -> Agent:
    """The agent `spec` names, ready to drive a run of `plan`: a replies file read, a
    model's providers and keys checked (`config`: the folder the workflow's configuration
    is found from). Every problem is an `AgentError` (or the agent's own error) before
    any run is created or touched. `config_file` names the configuration instead (`--config`);
    `allow_shell` offers the model `run_command` whatever `[tools] shell` says; `toolsets`:
    more tools a model may call beside its decisions and the workspace's (MCP servers)."""
    if spec.kind == "scripted":
        from .scripted import ScriptedAgent

        assert spec.script is not None
        return ScriptedAgent.from_file(spec.script, workspace)
    if spec.kind == "llm":
        return _llm_agent(plan, llms, (config, config_file), workspace, allow_shell, toolsets)
    if spec.kind == "mcp":
        raise AgentError("an `mcp` run is driven by an MCP client through `todoflow serve`, not by `run`")
    from .human import HumanAgent

    return HumanAgent(*terminal)


def _llm_agent(
    plan: RunPlan,
    llms: LlmChoices,
    config: tuple[Path, Path | None],
    workspace: Path,
    allow_shell: bool,
    toolsets: tuple[Toolset, ...],
) -> Agent:
    try:
        import openai  # noqa: F401
    except ImportError:
        raise AgentError("`--agent llm` needs the openai package: pip install 'todoflow[llm]'") from None
    from .llm import LlmAgent
    from .llm_config import LlmConfig, check_plan, load_config
    from .workspace_tools import Bounds, WorkspaceTools

    read = load_config(config[0], None, None, file=config[1])
    found = LlmConfig(read.providers, llms, read.tools, read.mcp, read.source)
    check_plan(plan, found)
    shell = allow_shell or read.tools.shell
    tools = WorkspaceTools(workspace, shell=shell, bounds=Bounds(shell_timeout_s=read.tools.shell_timeout_s))
    return LlmAgent(found, toolsets=(tools, *toolsets))
