"""Run folders: the one way to start a run, the one way to open one, and the list of runs.

`start(definition, run_dir, ...)` makes a run folder from a `RunDefinition` (its meta,
run.json, is built here and nowhere else) and returns the run's engine;
`open_process(run_dir, process_id)` opens an existing run, for stepping or — with
`read_only` — for looking at it, which writes nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from todoflow.compiler.files import sync_tree, write_atomically
from todoflow.compiler.formats import Todos
from todoflow.dsl.nodes import replace

from .definition import RunDefinition
from .engine import Clock, Engine, utc_now
from .learnings import Learnings
from .llm_choice import LlmChoices, parse_llm
from .plan import RunPlan, Task, load_plan, with_ready_tasks
from .store import FolderStore, StoreError, prepare_folder

READY = "ready_tasks.json"


class RunMeta(BaseModel):
    """run.json: who the process is. Written once, when the run starts."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    process_id: str
    workflow_id: str
    started_at: str
    title: str = ""
    source: str = ""  # the file the definition was read from, resolved, or `<string>`
    source_sha256: str | None = None
    workspace: str = "."
    parent_execution_id: str | None = None
    start_attempt_id: str | None = None
    goal: str | None = None  # a caller's goal: the objective of the first todo_task step
    learnings: str | None = None  # the learnings folder, resolved
    llm: str | None = None  # the runtime default model, `PROVIDER:MODEL`
    preset_llm: str | None = None  # the preset's model
    agent: str | None = None  # what drives the run: `human`, `scripted:FILE`, `llm`, `mcp`
    fast_path_only: bool = False  # learn_code: a missing or failing script is an error, no fallback


def new_process_id(workflow_id: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{workflow_id}-{stamp}-{secrets.token_hex(3)}"


def start(
    definition: RunDefinition,
    run_dir: Path,
    *,
    workspace: Path,
    ready: Mapping[str, tuple[Task, ...]] | None = None,
    goal: str | None = None,
    parent_execution_id: str | None = None,
    start_attempt_id: str | None = None,
    learnings: Path | None = None,
    llms: LlmChoices | None = None,
    agent: str | None = None,
    fast_path_only: bool = False,
    process_id: str | None = None,
    clock: Clock = utc_now,
) -> Engine:
    """A new run of `definition` in `run_dir`, and its engine. `ready` holds caller-given
    checklists (`definition.ready_checklists` checks them) by step id; `goal` becomes the
    objective of the first todo_task step; `learnings` is the learnings folder (default:
    `learnings/` beside the source, or in the workspace for source text); `llms` the
    preset's and the default model; `agent` what drives the run (resume reuses it)."""
    pid = process_id or new_process_id(definition.workflow_id)
    llms = llms or LlmChoices()
    meta = RunMeta(
        process_id=pid,
        workflow_id=definition.workflow_id,
        started_at=clock(),
        title=definition.title,
        source=definition.source,
        source_sha256=definition.source_sha256,
        workspace=str(workspace.resolve()),
        parent_execution_id=parent_execution_id,
        start_attempt_id=start_attempt_id,
        goal=goal,
        learnings=str((learnings or default_learnings(definition, workspace)).resolve()),
        llm=str(llms.default) if llms.default else None,
        preset_llm=str(llms.preset) if llms.preset else None,
        agent=agent,
        fast_path_only=fast_path_only,
    )
    folder = run_dir / pid
    _create(folder, definition, meta, ready or {})
    return open_process(run_dir, pid, clock=clock)[0]


def _create(
    folder: Path, definition: RunDefinition, meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
) -> None:
    """The run folder, whole or not at all: a failure (a full disk) removes what was made."""
    folder.mkdir(parents=True, exist_ok=False)
    try:
        for relative, text in definition.files:
            write_atomically(folder / "plan" / relative, text)
        if ready:
            payload = {step: [task.as_dict() for task in tasks] for step, tasks in ready.items()}
            write_atomically(
                folder / "plan" / READY, json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
            )
        prepare_folder(folder, definition.plan)
        write_atomically(folder / "run.json", meta.model_dump_json(indent=2, exclude_none=True) + "\n")
        sync_tree(folder)  # a confirmed step must never outlive the plan it is replayed against
    except OSError as error:
        shutil.rmtree(folder, ignore_errors=True)
        raise StoreError(f"cannot create the run folder {folder}: {error.strerror or error}") from None


def open_process(run_dir: Path, process_id: str, clock: Clock = utc_now) -> tuple[Engine, FolderStore]:
    """The engine (and store) of an existing run. Opening writes nothing: the store
    becomes a writer at its first step, and only then repairs what a crash left."""
    folder = run_dir / Path(process_id).name
    meta = read_meta(folder)
    learnings = Learnings(Path(meta.learnings)) if meta.learnings else None
    plan = _plan(folder, meta)
    store = FolderStore(folder, plan, meta.process_id, meta.started_at, learnings, meta.source_sha256)
    workflow = {"id": meta.workflow_id, "title": store.plan.title}
    llms = LlmChoices(
        parse_llm(meta.preset_llm, "preset_llm") if meta.preset_llm else None,
        parse_llm(meta.llm, "llm") if meta.llm else None,
    )
    return Engine(store, Path(meta.workspace), workflow, clock, llms, learnings), store


def default_learnings(definition: RunDefinition, workspace: Path) -> Path:
    """`learnings/` beside the workflow's source (or its plan.json); for source text, in
    the workspace."""
    source = Path(definition.source)
    return (source.parent if source.is_absolute() else workspace) / "learnings"


def _plan(folder: Path, meta: RunMeta) -> RunPlan:
    """The plan a run walks: the stored plan, the caller's goal and ready checklists."""
    plan = load_plan(folder / "plan", meta.workflow_id, meta.title or meta.workflow_id)
    first = plan.first_checklist_step
    if meta.goal and first is not None:
        plan = plan.with_steps(
            tuple(replace(s, description=meta.goal) if s is first else s for s in plan.steps)
        )
    ready_file = folder / "plan" / READY
    if ready_file.exists():
        data = json.loads(ready_file.read_text(encoding="utf-8"))
        ready = {step: tuple(Task.from_dict(t) for t in tasks) for step, tasks in data.items()}
        plan = with_ready_tasks(plan, ready)
    return plan


def processes(run_dir: Path) -> list[Path]:
    """Run folders, newest first."""
    if not run_dir.is_dir():
        return []
    found = [p for p in run_dir.iterdir() if (p / "run.json").is_file()]
    return sorted(found, key=lambda p: (os.stat(p / "run.json").st_mtime, p.name), reverse=True)


def read_meta(folder: Path) -> RunMeta:
    try:
        return RunMeta.model_validate_json((folder / "run.json").read_bytes())
    except FileNotFoundError:
        known = ", ".join(p.name for p in processes(folder.parent)[:20]) or "none"
        raise StoreError(f"no run `{folder.name}` in {folder.parent} (runs: {known})") from None
    except (OSError, ValidationError) as error:
        raise StoreError(f"run `{folder.name}`: its run.json cannot be read ({_first_line(error)})") from None


def all_metas(run_dir: Path) -> Iterator[tuple[Path, RunMeta | StoreError]]:
    """Every run folder with its meta, or the error that says why it cannot be read."""
    for folder in processes(run_dir):
        try:
            yield folder, read_meta(folder)
        except StoreError as error:
            yield folder, error


def final_todos(folder: Path, step_ids: Iterable[str]) -> dict[str, Todos]:
    """The todos.json of each step in `step_ids` that has one (a regular step has none);
    of a finished step, its final list. One that cannot be read is left out: display only."""
    found = {}
    for step_id in step_ids:
        try:
            text = (folder / "todos" / f"{step_id}.json").read_text(encoding="utf-8")
            found[step_id] = Todos.model_validate_json(text)
        except (OSError, ValueError):
            continue
    return found


def changed_definition(meta: RunMeta) -> str | None:
    """Why a run should not continue silently: its source file changed since it started."""
    from todoflow.dsl.parser import normalize, source_sha256

    source = Path(meta.source)
    if not meta.source or not source.is_file():
        return None
    try:
        current = source_sha256(normalize(source.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return None
    if current == meta.source_sha256:
        return None
    was = (meta.source_sha256 or "?")[:12]
    return (
        f"{source} changed since run {meta.process_id} started (source_sha256 {was}… is now {current[:12]}…)"
    )


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
