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
from todoflow.dsl.diagnostics import SourceError, has_errors

if TYPE_CHECKING:
    from todoflow.compiler.artifacts import Artifacts
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
        file = Path(source)
        text = file.read_bytes().decode("utf-8")
        return Compiled(analyze(text, path or str(source), file.parent))
    return Compiled(analyze(source, path or "<string>"))


def start(
    source: str | os.PathLike[str],
    *,
    run_dir: str | os.PathLike[str] = ".todoflow/runs",
    workspace: str | os.PathLike[str] = ".",
    tasks: list[dict[str, Any]] | None = None,
) -> Engine:
    """Start a run of a workflow (a `.todoflow` file or source text, or a plan.json) and
    return its passive engine: `engine.directive()` says what the current node asks,
    `engine.step(attempt_id, reply)` applies a reply. Use it as a context manager.

    `tasks` is a ready checklist for the first todo_task step. Raises `TodoflowError`
    when the workflow does not compile, `PlanError` when a plan or checklist cannot run.
    """
    from todoflow.compiler.artifacts import emit
    from todoflow.runtime import process
    from todoflow.runtime.plan import PlanError, from_plan, load_plan_files, parse_ready_tasks

    path = Path(source) if isinstance(source, os.PathLike) or "\n" not in source else None
    definition: Any
    if path is not None and (path.suffix == ".json" or path.is_dir()):
        definition, problems = load_plan_files(path)
        if definition is None:
            raise SourceError(problems, {})
        title, digest, origin = definition.title, definition.source_sha256, definition.source
    else:
        compiled = compile(source)
        compiled.raise_for_errors()
        assert compiled.workflow is not None
        definition = emit(compiled.workflow)
        title, digest = compiled.workflow.title, compiled.workflow.source_sha256
        origin = str(Path(source).resolve()) if path is not None and path.is_file() else "<string>"
    ready = {}
    if tasks is not None:
        plan = from_plan(_plan_model(definition), "", "", None)
        first = next((s.id for s in plan.steps if s.kind == "todo_task"), None)
        if first is None:
            raise PlanError("the workflow has no todo_task step to take a checklist")
        ready = {first: parse_ready_tasks(tasks, "tasks")[0]}
    meta = {
        "title": title,
        "source": origin,
        "source_sha256": digest,
        "workspace": str(Path(workspace).resolve()),
    }
    folder = process.create(Path(run_dir), definition, meta, ready)
    return process.open_process(Path(run_dir), folder.name)[0]


def resume(process_id: str, *, run_dir: str | os.PathLike[str] = ".todoflow/runs") -> Engine:
    """The engine of an existing run, to continue it (from any process, after any crash)."""
    from todoflow.runtime import process

    engine, store = process.open_process(Path(run_dir), process_id)
    store.repair()
    return engine


def _plan_model(definition: Any) -> Any:
    from todoflow.compiler.formats import Plan

    return Plan.model_validate_json(dict(definition.files)["plan.json"])
