"""What a run starts from: one frozen `RunDefinition`, read from any input by one reader
per format, and the ready checklists a caller may hand it.

- a `.todoflow` file or source text: parsed, checked and emitted by the compiler;
- a compiled folder (plan.json with step_config.json and prompts/ beside it) or a
  plan.json made elsewhere, legacy nested steps flattened on the way in.

The CLI, the Python API and the MCP server read definitions here and start runs with
`process.start`; nothing else builds a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from todoflow.compiler.analysis import analyze
from todoflow.compiler.formats import Plan, StepConfig
from todoflow.compiler.model import CheckedWorkflow
from todoflow.compiler.sources import read_source
from todoflow.dsl.diagnostics import Diagnostic, SourceError, has_errors
from todoflow.dsl.nodes import node
from todoflow.dsl.parser import normalize, source_sha256

from .plan import PlanError, RunPlan, Task, configs_of, from_plan, parse_ready_tasks, templates_of

STRING = "<string>"
MOVED = "N0301"  # the note on a task moved after a task it needs


@node
class RunDefinition:
    workflow_id: str
    title: str
    plan: RunPlan  # as a run walks it (the source's own ready checklists included)
    files: tuple[tuple[str, str], ...]  # what a run stores in plan/: plan.json, step_config.json, prompts/
    source: str  # the file it was read from, resolved, or `<string>`
    source_sha256: str

    @property
    def first_checklist_step(self) -> str | None:
        step = self.plan.first_checklist_step
        return None if step is None else step.id


class Reading(NamedTuple):
    """A definition, or the diagnostics that forbid running it; warnings and notes either way."""

    definition: RunDefinition | None
    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, str]  # every text the diagnostics may point into
    moved: tuple[tuple[str, str], ...] = ()  # (step id, note): a source's tasks its order moved

    def or_raise(self) -> RunDefinition:
        if self.definition is None:
            raise SourceError(self.diagnostics, self.sources)
        return self.definition

    @property
    def notes(self) -> list[str]:
        """What the author is told before work starts (tasks moved by their dependencies)."""
        return [d.message for d in self.diagnostics if d.severity == "note"]


def read_definition(path: Path, shown: str | None = None) -> Reading:
    """The definition in a file or folder: a `.todoflow` source, a compiled folder, or a
    plan.json. `shown` is the name diagnostics use (default: the path as given)."""
    if path.is_dir() or path.suffix == ".json":
        return _from_plan_files(path)
    name = shown or str(path)
    text, problem = read_source(str(path))
    if problem is not None:
        return Reading(None, (problem,), {name: text})
    return from_source(text, name, path.parent, origin=str(path.resolve()))


def from_source(text: str, path: str = STRING, base: Path | None = None, origin: str = STRING) -> Reading:
    """The definition of `.todoflow` source text (its prompt files read relative to `base`)."""
    from todoflow.compiler.artifacts import emit

    analysis = analyze(text, path, base)
    workflow = analysis.workflow
    if workflow is None or has_errors(analysis.diagnostics):
        return Reading(None, analysis.diagnostics, analysis.sources)
    stored = {k: v for k, v in emit(workflow).files if _stored(k)}
    definition = _definition(workflow.id, workflow.title, stored, origin, normalize(text))
    return Reading(definition, analysis.diagnostics, analysis.sources, _moved(workflow, analysis.diagnostics))


def _moved(workflow: CheckedWorkflow, found: tuple[Diagnostic, ...]) -> tuple[tuple[str, str], ...]:
    """The compiler's notes on tasks its order moved (N0301), each with the step whose
    `tasks` block it points into."""
    steps = [step for step in workflow.all_steps() if step.tasks]
    return tuple(
        (step.id, d.message)
        for d in found
        if d.code == MOVED
        for step in steps
        if step.span.path == d.span.path
        and (step.span.line, step.span.column) <= (d.span.line, d.span.column)
        and (d.span.end_line, d.span.end_column) <= (step.span.end_line, step.span.end_column)
    )


def _stored(relative: str) -> bool:
    """The files of a compiled workflow a run keeps: the plan, not the generated machine."""
    return relative.endswith(".json") or relative.startswith("prompts/")


def _definition(
    workflow_id: str, title: str, files: Mapping[str, str], origin: str, text: str
) -> RunDefinition:
    plan = Plan.model_validate_json(files["plan.json"])
    config = (
        StepConfig.model_validate_json(files["step_config.json"]) if "step_config.json" in files else None
    )
    plan_ = from_plan(plan, workflow_id, title, templates_of(files), configs_of(config))
    return RunDefinition(workflow_id, title, plan_, tuple(sorted(files.items())), origin, source_sha256(text))


def _from_plan_files(path: Path) -> Reading:
    """plan.json (or a folder holding one), legacy nested steps flattened, beside it
    step_config.json and prompts/ if present."""
    from todoflow.compiler.output import read_manifest
    from todoflow.compiler.planfile import read_plan, read_step_config, workflow_id_from_name
    from todoflow.compiler.prompt_files import read_prompt_files

    file = path / "plan.json" if path.is_dir() else path
    text, problem = read_source(str(file))
    if problem is not None:
        return Reading(None, (problem,), {str(file): text})
    text = normalize(text)
    read = read_plan(text, str(file))
    found = list(read.diagnostics)
    files = {}
    if read.plan is not None:
        files["plan.json"] = read.plan.to_json()
    config = file.with_name("step_config.json")
    if config.is_file():
        parsed, problems = read_step_config(config.read_text(encoding="utf-8"), str(config))
        found += problems
        if parsed is not None:
            files["step_config.json"] = parsed.to_json()
    prompts, problems = read_prompt_files(file.parent, str(file.parent))  # confined: links out are left out
    found += problems
    for (step_id, kind), prompt in sorted(prompts.items()):
        files[f"prompts/{step_id}/{kind}.j2"] = prompt.text
    sources = {str(file): text}
    if read.plan is None or has_errors(found):
        return Reading(None, tuple(found), sources)
    workflow_id = workflow_id_from_name(file.resolve().parent.name)
    listed = (read_manifest(file.parent) or {}).get("title")  # a compiled folder names its workflow
    title = (
        listed
        if isinstance(listed, str) and listed.strip()
        else f"{file.parent.name or workflow_id}/plan.json"
    )
    try:
        definition = _definition(workflow_id, title, files, str(file.resolve()), text)
    except PlanError as error:
        raise PlanError(f"{file}: {error}") from None
    return Reading(definition, tuple(found), sources)


def ready_checklists(
    definition: RunDefinition, data: Any, where: str
) -> tuple[dict[str, tuple[Task, ...]], list[tuple[str, str]]]:
    """A caller's ready checklists: a list (for the first todo_task step) or an object
    mapping step ids to lists. Returns them in dependency order, with a (step id, note)
    for each moved task and for each checklist that replaces a step's own `tasks` block."""
    if isinstance(data, list):
        first = definition.first_checklist_step
        if first is None:
            raise PlanError(
                f"{where}: workflow `{definition.workflow_id}` has no todo_task step to take a checklist"
            )
        data = {first: data}
    if not isinstance(data, dict):
        raise PlanError(f"{where}: a list of tasks, or an object mapping step ids to lists")
    ready, notes = {}, []
    for step_id, items in data.items():
        tasks, moved = parse_ready_tasks(items, f"{where}:{step_id}")
        step = definition.plan.by_id.get(step_id)
        if step is None:
            raise PlanError(f"{where}: the plan has no step `{step_id}` to take a checklist")
        if step.kind != "todo_task":
            raise PlanError(
                f"{where}: step `{step_id}` is a `{step.kind}` step; only a todo_task step takes a checklist"
            )
        if step.ready_tasks is not None:
            own = len(step.ready_tasks)
            notes.append(
                (
                    step_id,
                    f"the given checklist ({_tasks(len(tasks))}) replaces the step's own "
                    f"`tasks` block ({_tasks(own)})",
                )
            )
        ready[step_id] = tasks
        notes += [(step_id, note) for note in moved]
    return ready, notes


def _tasks(count: int) -> str:
    return f"{count} task{'s' if count != 1 else ''}"
