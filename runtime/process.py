"""Where runs live: the one way to start a run, the one way to open one, and the list of runs.

A *store location* is a run folder's parent (a `Path`, the default `.todoflow/runs`) or a
PostgreSQL database (a `postgresql://` URL, `runtime.pg_store`); `runs_at` gives the
`Runs` of either. `start(definition, where, ...)` makes a run from a `RunDefinition`
(its meta, run.json, is built here and nowhere else) and returns the run's engine;
`open_process(where, process_id)` opens an existing run, for stepping or for looking at
it, which writes nothing. `FolderRuns` is the run folders' `Runs`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from todoflow.compiler.files import sync_tree, write_atomically
from todoflow.compiler.formats import Todos
from todoflow.dsl.nodes import replace

from .definition import RunDefinition
from .engine import Clock, Engine, utc_now
from .learnings import Learnings
from .llm_choice import LlmChoices, parse_llm
from .plan import RunPlan, Task, load_plan, with_ready_tasks
from .store import CHUNK, JOURNAL, FolderStore, Store, StoreError, prepare_folder

READY = "ready_tasks.json"
FOLLOW_POLL = 0.2  # seconds between looks at a run folder's journal while following it


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
    process_id: str | None = None,
    clock: Clock = utc_now,
) -> Engine:
    """A new run of `definition` where runs live (`runs_at`), and its engine. `ready` holds
    caller-given checklists (`definition.ready_checklists` checks them) by step id; `goal`
    becomes the objective of the first todo_task step; `learnings` is the learnings folder
    of a run folder (default: `learnings/` beside the source, or in the workspace for
    source text; a database keeps its own); `llms` the preset's and the default model;
    `agent` what drives the run (resume reuses it)."""
    runs = runs_at(where)
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
        learnings=str((learnings or default_learnings(definition, workspace)).resolve())
        if runs.learnings_in_folders
        else None,
        llm=str(llms.default) if llms.default else None,
        preset_llm=str(llms.preset) if llms.preset else None,
        agent=agent,
        fast_path_only=fast_path_only,
    )
    runs.create(definition.files, meta, ready or {})
    return open_process(runs, pid, clock=clock)[0]


def _ready_text(ready: Mapping[str, tuple[Task, ...]]) -> str:
    payload = {step: [task.as_dict() for task in tasks] for step, tasks in ready.items()}
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def _meta_text(meta: RunMeta) -> str:
    return meta.model_dump_json(indent=2, exclude_none=True) + "\n"


def open_process(where: Path | str | Runs, process_id: str, clock: Clock = utc_now) -> tuple[Engine, Store]:
    """The engine (and store) of an existing run. Opening writes nothing: the store
    becomes a writer at its first step, and only then repairs what a crash left."""
    meta, store, learnings = runs_at(where).load(process_id)
    workflow = {"id": meta.workflow_id, "title": store.plan.title}
    llms = LlmChoices(
        parse_llm(meta.preset_llm, "preset_llm") if meta.preset_llm else None,
        parse_llm(meta.llm, "llm") if meta.llm else None,
    )
    engine = Engine(store, Path(meta.workspace), workflow, clock, llms, learnings, meta.fast_path_only)
    return engine, store


def run_plan(plan: RunPlan, meta: RunMeta, ready: str | None) -> RunPlan:
    """The plan a run walks: its stored plan, the caller's goal and ready checklists
    (`ready`: the text of plan/ready_tasks.json)."""
    first = plan.first_checklist_step
    if meta.goal and first is not None:
        plan = plan.with_steps(
            tuple(replace(s, description=meta.goal) if s is first else s for s in plan.steps)
        )
    if ready is not None:
        data = json.loads(ready)
        plan = with_ready_tasks(
            plan, {step: tuple(Task.from_dict(t) for t in tasks) for step, tasks in data.items()}
        )
    return plan


class RunRecord(NamedTuple):
    """A whole run as it moves between stores (`todoflow db export`/`import`): everything
    but what is derived from the journal."""

    process_id: str
    meta: str  # run.json's text
    files: dict[str, str]  # plan/'s files by their path inside it
    journal: list[str]  # the journal's lines, without their line ends
    learnings: list[tuple[str, str]]  # (sub-step id, line) of the run's learnings records, in order


class Runs(Protocol):
    """Where runs live: run folders (`FolderRuns`) or a database (`pg_store.PgRuns`)."""

    location: str  # as messages name it
    learnings_in_folders: bool  # a run's learnings go to the folder its meta names (else: the store's own)

    def create(
        self, files: Iterable[tuple[str, str]], meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
    ) -> None:
        """A new run, whole or not at all: its meta, plan files and ready checklists."""
        ...

    def load(self, process_id: str) -> tuple[RunMeta, Store, Learnings | None]:
        """An existing run's meta, its store (holding its plan) and its learnings."""
        ...

    def read_meta(self, process_id: str) -> RunMeta: ...

    def metas(self) -> Iterator[tuple[str, RunMeta | StoreError]]:
        """Every run, newest first, with its meta or the error that says why it cannot be read."""
        ...

    def final_todos(self, process_id: str, step_ids: Iterable[str]) -> dict[str, Todos]:
        """The final todos.json of each finished todo_task step in `step_ids` (display only)."""
        ...

    def plan_file(self, process_id: str, relative: str) -> str | None:
        """A file of the run's stored plan (None: there is none)."""
        ...

    def learnings(self, meta: RunMeta | None) -> Learnings | None:
        """The learnings a run records into (None: of the store as a whole)."""
        ...

    def starts(self) -> Starts:
        """MCP starts prepared and executed against these runs."""
        ...

    def changes(self, process_id: str, seq: int) -> Iterator[None]:
        """Wakes (yields) whenever the run's journal may have grown past entry `seq`; the
        caller reads what is new by sequence number, so a missed wake costs nothing."""
        ...

    def export(self, process_id: str) -> RunRecord: ...

    def import_run(self, record: RunRecord) -> None: ...

    def close(self) -> None: ...


class Starts(Protocol):
    """MCP `start`: prepared records, each executed once across every server."""

    def prepare(self, start_id: str, record: dict[str, Any]) -> None: ...

    def executed(self, start_id: str) -> str | None:
        """The process an executed start made ('' while it is being made), or None."""
        ...

    def record(self, start_id: str) -> dict[str, Any] | None: ...

    def claim(self, start_id: str) -> bool:
        """Claim a start for execution; False if another server claimed it first."""
        ...

    def done(self, start_id: str, process_id: str) -> None: ...

    def release(self, start_id: str) -> None:
        """Give a claim back (its execution failed)."""
        ...

    def expire(self, older_than: float) -> None:
        """Forget starts prepared (or executed) more than `older_than` seconds ago."""
        ...


def runs_at(where: Path | str | Runs) -> Runs:
    """The runs of a store location: a run folder's parent (a path) or a `postgresql://` URL."""
    if isinstance(where, Path):
        return FolderRuns(where)
    if isinstance(where, str):
        if is_database(where):
            from .pg_store import pg_runs

            return pg_runs(where)
        return FolderRuns(Path(where))
    return where


def is_database(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


class FolderRuns:
    """Runs in run folders under one folder (`<run_dir>/<process-id>/`)."""

    learnings_in_folders = True

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.location = str(run_dir)

    def folder(self, process_id: str) -> Path:
        return self.run_dir / Path(process_id).name

    def create(
        self, files: Iterable[tuple[str, str]], meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
    ) -> None:
        plan_files = dict(files)
        if ready:
            plan_files[READY] = _ready_text(ready)
        self._create(meta.process_id, plan_files, _meta_text(meta), [])

    def _create(self, process_id: str, files: Mapping[str, str], meta: str, journal: list[str]) -> None:
        """The run folder, whole or not at all: a failure (a full disk) removes what was made."""
        folder = self.folder(process_id)
        folder.mkdir(parents=True, exist_ok=False)
        try:
            for relative, text in files.items():
                write_atomically(folder / "plan" / relative, text)
            plan = _plan(folder, RunMeta.model_validate_json(meta))
            prepare_folder(folder, plan)
            if journal:
                _write_journal(folder / JOURNAL, "".join(line + "\n" for line in journal).encode())
            write_atomically(folder / "run.json", meta)
            sync_tree(folder)  # a confirmed step must never outlive the plan it is replayed against
        except OSError as error:
            shutil.rmtree(folder, ignore_errors=True)
            raise StoreError(f"cannot create the run folder {folder}: {error.strerror or error}") from None

    def load(self, process_id: str) -> tuple[RunMeta, Store, Learnings | None]:
        folder = self.folder(process_id)
        meta = read_meta(folder)
        learnings = Learnings(Path(meta.learnings)) if meta.learnings else None
        plan = _plan(folder, meta)
        store = FolderStore(folder, plan, meta.process_id, meta.started_at, learnings, meta.source_sha256)
        return meta, store, learnings

    def read_meta(self, process_id: str) -> RunMeta:
        return read_meta(self.folder(process_id))

    def metas(self) -> Iterator[tuple[str, RunMeta | StoreError]]:
        for folder, meta in all_metas(self.run_dir):
            yield folder.name, meta

    def final_todos(self, process_id: str, step_ids: Iterable[str]) -> dict[str, Todos]:
        return final_todos(self.folder(process_id), step_ids)

    def plan_file(self, process_id: str, relative: str) -> str | None:
        path = self.folder(process_id) / "plan" / relative
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def learnings(self, meta: RunMeta | None) -> Learnings | None:
        return Learnings(Path(meta.learnings)) if meta is not None and meta.learnings else None

    def starts(self) -> Starts:
        return FolderStarts(self.run_dir / ".starts")

    def changes(self, process_id: str, seq: int) -> Iterator[None]:
        while True:  # a run folder tells nobody: look at it now and then
            time.sleep(FOLLOW_POLL)
            yield

    def export(self, process_id: str) -> RunRecord:
        folder = self.folder(process_id)
        meta = read_meta(folder)
        plan = folder / "plan"
        files = {
            p.relative_to(plan).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(plan.rglob("*"))
            if p.is_file()
        }
        learnings = self.learnings(meta)
        found = learnings.lines(meta.process_id) if learnings is not None else []
        return RunRecord(
            meta.process_id,
            (folder / "run.json").read_text(encoding="utf-8"),
            files,
            _journal_lines(folder / JOURNAL),
            found,
        )

    def import_run(self, record: RunRecord) -> None:
        if self.folder(record.process_id).exists():
            raise StoreError(f"there is a run `{record.process_id}` in {self.run_dir} already")
        self._create(record.process_id, record.files, record.meta, record.journal)
        meta = read_meta(self.folder(record.process_id))
        learnings = self.learnings(meta)
        if learnings is not None:
            learnings.add_lines(record.learnings)

    def close(self) -> None:
        """Nothing held."""


def _journal_lines(path: Path) -> list[str]:
    """The journal's complete lines, as written (its zero tail and a torn last line left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = data.find(b"\0")
    data = data if end < 0 else data[:end]
    return data[: data.rfind(b"\n") + 1].decode().splitlines()


def _write_journal(path: Path, data: bytes) -> None:
    """A journal's lines written into a new run folder's allocated journal, synced."""
    handle = os.open(path, os.O_RDWR)
    try:
        if len(data) >= os.fstat(handle).st_size:
            os.posix_fallocate(handle, 0, len(data) + CHUNK)
        os.pwrite(handle, data, 0)
        os.fsync(handle)
    finally:
        os.close(handle)


class FolderStarts:
    """Starts as files of `<run_dir>/.starts/`: `<id>.json` prepared, `<id>.executed` claimed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def prepare(self, start_id: str, record: dict[str, Any]) -> None:
        write_atomically(self.folder / f"{start_id}.json", json.dumps(record, ensure_ascii=False) + "\n")

    def executed(self, start_id: str) -> str | None:
        path = self.folder / f"{start_id}.executed"
        return path.read_text(encoding="utf-8").strip() if path.exists() else None

    def record(self, start_id: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = json.loads((self.folder / f"{start_id}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return found

    def claim(self, start_id: str) -> bool:
        try:  # across servers too: the first to create the file
            os.close(os.open(self.folder / f"{start_id}.executed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def done(self, start_id: str, process_id: str) -> None:
        (self.folder / f"{start_id}.executed").write_text(process_id, encoding="utf-8")
        (self.folder / f"{start_id}.json").unlink(missing_ok=True)  # executed: the claim says so from now on

    def release(self, start_id: str) -> None:
        (self.folder / f"{start_id}.executed").unlink(missing_ok=True)

    def expire(self, older_than: float) -> None:
        limit = time.time() - older_than
        for entry in self.folder.iterdir():
            try:
                if entry.stat().st_mtime < limit:
                    entry.unlink()
            except OSError:
                continue


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


def _plan(folder: Path, meta: RunMeta) -> RunPlan:
    """The plan a run folder's run walks."""
    plan = load_plan(folder / "plan", meta.workflow_id, meta.title or meta.workflow_id)
    ready_file = folder / "plan" / READY
    return run_plan(plan, meta, ready_file.read_text(encoding="utf-8") if ready_file.exists() else None)


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
