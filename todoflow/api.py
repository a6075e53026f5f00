"""The facade: the one place that chains the stages and reads files.

`analyze` runs parse and check over a source (reading `prompt ... from` files next
to it); `compile` adds emission and returns a `Compiled`, the value the CLI, the
pytest plugin and users' own code work with.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from todoflow.compiler.analysis import Analysis, analyze
from todoflow.compiler.sources import read_source
from todoflow.dsl.diagnostics import SourceError, has_errors
from todoflow.runtime import RUN_DIR

if TYPE_CHECKING:
    from todoflow.compiler.artifacts import Artifacts
    from todoflow.runtime.definition import Reading
    from todoflow.runtime.engine import Engine


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
) -> Engine:
    """Start a run of a workflow (a `.todoflow` file or source text, a compiled folder or a
    plan.json) and return its passive engine: `engine.directive()` says what the current
    node asks, `engine.step(attempt_id, reply)` applies a reply. Use it as a context manager.

    `tasks` is a ready checklist for the first todo_task step (or a mapping of step ids to
    checklists). Raises `SourceError` (a `TodoflowError`) when the workflow does not
    compile, `PlanError` when a plan or checklist cannot run.
    """
    from todoflow.runtime import process
    from todoflow.runtime.definition import ready_checklists

    definition = _reading(source).or_raise()
    ready = None if tasks is None else ready_checklists(definition, tasks, "tasks")[0]
    return process.start(definition, Path(run_dir), workspace=Path(workspace), ready=ready)


def resume(process_id: str, *, run_dir: str | os.PathLike[str] = RUN_DIR) -> Engine:
    """The engine of an existing run, to continue it (from any process, after any crash)."""
    from todoflow.runtime import process

    return process.open_process(Path(run_dir), process_id)[0]


def _reading(source: str | os.PathLike[str]) -> Reading:
    from todoflow.runtime.definition import from_source, read_definition

    if isinstance(source, os.PathLike) or ("\n" not in source and os.path.exists(source)):
        return read_definition(Path(source))
    return from_source(source)
