"""Runs start and open here: the one way to start a run, the one way to open one.

`start(definition, where, ...)` makes a run from a `RunDefinition` at a store location
(its meta, run.json, is built here and nowhere else) and returns the run's engine;
`open_process(where, process_id)` opens an existing run, for stepping or for looking at
it, which writes nothing; `resume_process` opens one to drive it, repairing first what a
crash left behind in its derived files. A store location is a path (a folder of run folders, the
default `.todoflow/runs`) or a URL whose scheme names its adapter
(`store.base.runs_at`: `postgresql://…`, `memory://…`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from .definition import RunDefinition
from .engine import Clock, Engine, utc_now
from .llm_choice import LlmChoices, parse_llm
from .plan import Task, files_sha256
from .store.base import READY, RunMeta, Runs, Store, ready_text, runs_at


def new_process_id(workflow_id: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{workflow_id}-{stamp}-{secrets.token_hex(3)}"


def start(
    definition: RunDefinition,
    where: Path | str | Runs,
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
    config: tuple[str, str] | None = None,
    max_turns: int | None = None,
    process_id: str | None = None,
    clock: Clock = utc_now,
) -> Engine:
    """A new run of `definition` where runs live (`runs_at`), and its engine. `ready` holds
    caller-given checklists (`definition.ready_checklists` checks them) by step id; `goal`
    becomes the objective of the first todo_task step; `learnings` is the learnings folder
    (default: `learnings/` beside the source, or in the workspace for source text): a run
    folder records its learnings there, and a learn_code step's `main.py` is read from it
    whatever the store; `llms` the preset's and the default model; `agent` what drives the
    run (resume reuses it); `config` the path and sha256 of the configuration file the
    agent read (resume reads it again); `max_turns` every todo_task step's bound on
    orchestrator turns, instead of the steps' own (recorded in the meta, so a resumed run
    keeps it)."""
    runs = runs_at(where)
    pid = process_id or new_process_id(definition.workflow_id)
    llms = llms or LlmChoices()
    folder = learnings or default_learnings(definition, workspace)
    stored = dict(definition.files)
    if ready:
        stored[READY] = ready_text(ready)
    meta = RunMeta(
        process_id=pid,
        workflow_id=definition.workflow_id,
        started_at=clock(),
        title=definition.title,
        source=definition.source,
        source_sha256=definition.source_sha256,
        plan_sha256=files_sha256(stored),
        workspace=str(workspace.resolve()),
        parent_execution_id=parent_execution_id,
        start_attempt_id=start_attempt_id,
        goal=goal,
        learnings=str(folder.resolve()),
        llm=str(llms.default) if llms.default else None,
        preset_llm=str(llms.preset) if llms.preset else None,
        agent=agent,
        fast_path_only=fast_path_only,
        config=config[0] if config else None,
        config_sha256=config[1] if config else None,
        max_turns=max_turns,
    )
    runs.create(definition.files, meta, ready or {})
    return open_process(runs, pid, clock=clock)[0]


def open_process(where: Path | str | Runs, process_id: str, clock: Clock = utc_now) -> tuple[Engine, Store]:
    """The engine (and store) of an existing run. Opening writes nothing: the store
    becomes a writer at its first step, and only then repairs what a crash left."""
    meta, store, learnings = runs_at(where).load(process_id)
    workflow = {"id": meta.workflow_id, "title": store.plan.title}
    llms = LlmChoices(
        parse_llm(meta.preset_llm, "preset_llm") if meta.preset_llm else None,
        parse_llm(meta.llm, "llm") if meta.llm else None,
    )
    scripts = Path(meta.learnings) if meta.learnings else None
    engine = Engine(
        store, Path(meta.workspace), workflow, clock, llms, learnings, meta.fast_path_only, scripts
    )
    return engine, store


def resume_process(where: Path | str | Runs, process_id: str, clock: Clock = utc_now) -> Engine:
    """The engine of an existing run, to drive it (`todoflow.resume`, `serve`): opened as
    `open_process` opens it, then what a crash or a full disk left behind in its derived
    files repaired (`Engine.repair(quick=True)`), since a complete run gets no next step
    to do that. A damaged run raises `DamagedRun` here; derived files that cannot be
    written are logged."""
    engine = open_process(where, process_id, clock)[0]
    try:
        engine.repair(quick=True)
    except BaseException:
        engine.close()
        raise
    return engine


def copy_run(process_id: str, source: Runs, target: Runs) -> None:
    """A run copied from one store to another (`todoflow db export`/`import`): its meta,
    plan and journal as they are, its learnings records; what is derived from the
    journal (events, todos) is made again from it where the target keeps it. A damaged
    run is refused, and so is a process id the target holds already."""
    with open_process(source, process_id)[0] as engine:
        engine.directive()  # a damaged run is refused here, saying what is wrong
    target.import_run(source.export(process_id))
    with open_process(target, process_id)[0] as engine:
        engine.repair()


def default_learnings(definition: RunDefinition, workspace: Path) -> Path:
    """`learnings/` beside the workflow's source (or its plan.json); for source text, in
    the workspace."""
    source = Path(definition.source)
    return (source.parent if source.is_absolute() else workspace) / "learnings"


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
