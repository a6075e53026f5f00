"""The facade: the one place that chains the stages and reads files.

`analyze` runs parse and check over a source (reading `prompt ... from` files next
to it); `compile` adds emission and returns a `Compiled`, the value the CLI, the
pytest plugin and users' own code work with.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from todoflow.compiler.analysis import Analysis, analyze
from todoflow.compiler.sources import read_source
from todoflow.dsl.diagnostics import SourceError, has_errors
from todoflow.runtime import RUN_DIR

if TYPE_CHECKING:
    from collections.abc import Mapping

    from todoflow.compiler.artifacts import Artifacts
    from todoflow.runtime.agents.mcp_servers import McpToolset
    from todoflow.runtime.agents.spec import AgentSpec
    from todoflow.runtime.definition import Reading, RunDefinition
    from todoflow.runtime.engine import Engine
    from todoflow.runtime.llm_choice import LlmChoices
    from todoflow.runtime.plan import Task


class Compiled:
    """A compiled workflow: its artifacts, or the diagnostics that prevented them."""

    def __init__(self, analysis: Analysis) -> None:
        self.workflow = analysis.workflow
        self.diagnostics = analysis.diagnostics
        self.sources = analysis.sources

    @property
    def ok(self) -> bool:
        return self.workflow is not None and not has_errors(self.diagnostics)

    def raise_for_errors(self) -> None:
        if not self.ok:
            raise SourceError(self.diagnostics, self.sources)

    @cached_property
    def artifacts(self) -> Artifacts:
        from todoflow.compiler.artifacts import emit

        self.raise_for_errors()
        assert self.workflow is not None
        return emit(self.workflow)

    @property
    def plan(self) -> dict[str, Any]:
        """plan.json as data."""
        return json.loads(self.artifacts.file("plan.json"))  # type: ignore[no-any-return]

    @property
    def step_config(self) -> dict[str, Any]:
        """step_config.json as data."""
        return json.loads(self.artifacts.file("step_config.json"))  # type: ignore[no-any-return]

    @property
    def machine_source(self) -> str:
        return self.artifacts.file(f"machines/{self.artifacts.workflow_id}.py")

    @property
    def mermaid(self) -> str:
        return self.artifacts.file(f"machines/{self.artifacts.workflow_id}.mmd")

    @cached_property
    def machine_class(self) -> Any:
        """The live python-statemachine class (`StateChart` subclass) of the workflow."""
        from todoflow.compiler.machine import machine_class

        return machine_class(self.artifacts.machine)


def compile(source: str | os.PathLike[str], *, path: str | None = None) -> Compiled:
    """Compile a workflow from a file (a path) or from source text.

    A `Path` (or any path-like) is read as a file; so is a string without line breaks
    that names an existing file. Any other string is source text, named `path` in
    diagnostics. Errors do not raise: see `Compiled.ok` and `Compiled.diagnostics`.
    """
    if isinstance(source, os.PathLike) or ("\n" not in source and os.path.isfile(source)):
        name = path or str(source)
        text, problem = read_source(str(source))
        if problem is not None:  # not UTF-8: a diagnostic at the first bad byte
            return Compiled(Analysis(None, (problem,), {name: text}))
        return Compiled(analyze(text, name, Path(source).parent))
    return Compiled(analyze(source, path or "<string>"))


def start(
    source: str | os.PathLike[str],
    *,
    run_dir: str | os.PathLike[str] = RUN_DIR,
    workspace: str | os.PathLike[str] = ".",
    tasks: list[dict[str, Any]] | dict[str, Any] | None = None,
    agent: str | None = None,
    llm: str | None = None,
    preset_llm: str | None = None,
    learnings: str | os.PathLike[str] | None = None,
    fast_path_only: bool = False,
) -> Engine:
    """Start a run of a workflow (a `.todoflow` file or source text, a compiled folder or a
    plan.json) and return its passive engine: `engine.directive()` says what the current
    node asks, `engine.step(attempt_id, reply)` applies a reply. Use it as a context manager.

    `tasks` is a ready checklist for the first todo_task step (or a mapping of step ids to
    checklists). `agent` (`human`, `scripted:FILE`, `llm`, `mcp`), the models `llm` and
    `preset_llm` (`PROVIDER:MODEL`; for `llm`, `$TODOFLOW_LLM` and todoflow.toml too),
    `learnings` and `fast_path_only` are recorded with the run, as `todoflow run` records
    its options, so a resume drives it the same way. Raises `SourceError` (a
    `TodoflowError`) when the workflow does not compile, `PlanError` when a plan or
    checklist cannot run, `AgentError` for an unknown agent.
    """
    from todoflow.runtime import process

    definition = _reading(source).or_raise()
    spec, llms = _agent_options(definition, Path(workspace), agent, llm, preset_llm)
    return process.start(
        definition,
        Path(run_dir),
        workspace=Path(workspace),
        ready=_ready(definition, tasks),
        learnings=Path(learnings) if learnings is not None else None,
        llms=llms,
        agent=str(spec) if spec is not None else None,
        fast_path_only=fast_path_only,
    )


class RunOutcome(NamedTuple):
    """How `run` ended: `complete`, `blocked` or `stopped` (resumable), or `refused`."""

    process_id: str
    outcome: str


def run(
    source: str | os.PathLike[str],
    *,
    agent: str = "llm",
    run_dir: str | os.PathLike[str] = RUN_DIR,
    workspace: str | os.PathLike[str] = ".",
    tasks: list[dict[str, Any]] | dict[str, Any] | None = None,
    llm: str | None = None,
    preset_llm: str | None = None,
    learnings: str | os.PathLike[str] | None = None,
    fast_path_only: bool = False,
    mcp: bool = True,
    out: TextIO | None = None,
) -> RunOutcome:
    """Start a run and drive it with `agent` until it completes or stops, as `todoflow
    run` does: with `llm` (the default), the models of the options, the environment and
    todoflow.toml, and its MCP servers (`mcp=False`: none) started before anything runs.
    `out` receives the progress (default: nothing). Every problem (a model without a
    provider, a server that does not start) raises a `TodoflowError` before the run is
    created; a stopped run is resumed with `todoflow run --resume` or `resume`."""
    from todoflow.runtime import process
    from todoflow.runtime.agents.driver import drive
    from todoflow.runtime.agents.spec import make_agent

    definition = _reading(source).or_raise()
    spec, llms = _agent_options(definition, Path(workspace), agent, llm, preset_llm)
    assert spec is not None
    ready = _ready(definition, tasks)
    folder = _config_folder(definition, Path(workspace))
    with contextlib.ExitStack() as closing:
        servers = _mcp_servers(folder, closing) if spec.kind == "llm" and mcp else ()
        driver = make_agent(
            spec,
            definition.plan,
            llms,
            workspace=Path(workspace),
            config=folder,
            terminal=(sys.stdin, out or sys.stdout),
            toolsets=servers,
        )
        for each in servers:  # the pre-flight: a server that does not start stops us here
            each.start()
        engine = process.start(
            definition,
            Path(run_dir),
            workspace=Path(workspace),
            ready=ready,
            learnings=Path(learnings) if learnings is not None else None,
            llms=llms,
            agent=str(spec),
            fast_path_only=fast_path_only,
        )
        with engine:
            outcome = drive(engine, driver, out or io.StringIO(), fast_path_only=fast_path_only)
    return RunOutcome(engine.process_id, outcome)


def _agent_options(
    definition: RunDefinition, workspace: Path, agent: str | None, llm: str | None, preset_llm: str | None
) -> tuple[AgentSpec | None, LlmChoices]:
    """The agent, parsed, and the run's models: for `llm`, the options, the environment,
    then the configuration found from the workflow's folder, as `todoflow run` reads them."""
    from todoflow.runtime.agents.spec import AgentSpec
    from todoflow.runtime.llm_choice import choices_from

    spec = AgentSpec.parse(agent) if agent is not None else None
    if spec is not None and spec.kind == "llm":
        from todoflow.runtime.agents.llm_config import load_config

        return spec, load_config(_config_folder(definition, workspace), llm, preset_llm).choices
    return spec, choices_from(preset_llm, llm)


def _config_folder(definition: RunDefinition, workspace: Path) -> Path:
    """Where a run's configuration is looked for from: the source's folder (source text
    has none: the workspace)."""
    source = Path(definition.source)
    return source.parent if source.is_absolute() or source.exists() else workspace


def _ready(
    definition: RunDefinition, tasks: list[dict[str, Any]] | dict[str, Any] | None
) -> Mapping[str, tuple[Task, ...]] | None:
    from todoflow.runtime.definition import ready_checklists

    return None if tasks is None else ready_checklists(definition, tasks, "tasks")[0]


def _mcp_servers(folder: Path, closing: contextlib.ExitStack) -> tuple[McpToolset, ...]:
    from todoflow.runtime.agents.mcp_servers import configured

    servers = configured(folder)
    closing.callback(servers.close)
    return (servers,)


def resume(process_id: str, *, run_dir: str | os.PathLike[str] = RUN_DIR) -> Engine:
    """The engine of an existing run, to continue it (from any process, after any crash).
    Derived files a crash or a full disk left behind the journal (events.jsonl, todos,
    learnings) are rebuilt as it opens; when they are current nothing is written."""
    from todoflow.runtime import process

    return process.resume_process(Path(run_dir), process_id)


def _reading(source: str | os.PathLike[str]) -> Reading:
    from todoflow.runtime.definition import from_source, read_definition

    if isinstance(source, os.PathLike) or ("\n" not in source and os.path.exists(source)):
        return read_definition(Path(source))
    return from_source(source)
