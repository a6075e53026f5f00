"""Run folders: creating a process from compiled artifacts, opening one, listing them."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from todoflow.compiler.files import sync_tree, write_atomically
from todoflow.compiler.formats import Todos
from todoflow.dsl.nodes import replace

from .engine import Clock, Engine, utc_now
from .plan import RunPlan, Task, load_plan, with_ready_tasks
from .store import FolderStore, StoreError

DEFAULT_RUN_DIR = Path(".todoflow") / "runs"


def new_process_id(workflow_id: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{workflow_id}-{stamp}-{secrets.token_hex(3)}"


class Definition(Protocol):
    """What a run starts from: compiled `Artifacts`, or a plan's `PlanFiles`."""

    workflow_id: str
    files: tuple[tuple[str, str], ...]


def create(
    run_dir: Path,
    artifacts: Definition,
    meta: dict[str, Any],
    ready: dict[str, tuple[Task, ...]] | None = None,
    clock: Clock = utc_now,
) -> Path:
    """A new run folder holding the plan the run starts with; returns the folder."""
    process_id = meta.get("process_id") or new_process_id(artifacts.workflow_id)
    folder = run_dir / process_id
    folder.mkdir(parents=True, exist_ok=False)
    for relative, text in artifacts.files:
        if relative.endswith(".json") or relative.startswith("prompts/"):
            write_atomically(folder / "plan" / relative, text)
    if ready:
        payload = {step: [task.as_dict() for task in tasks] for step, tasks in ready.items()}
        write_atomically(
            folder / "plan" / "ready_tasks.json", json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        )
    record = {"process_id": process_id, "workflow_id": artifacts.workflow_id, "started_at": clock()} | meta
    record["process_id"] = process_id
    write_atomically(folder / "run.json", json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    sync_tree(folder)  # the journal's first step is durable; what it needs to be replayed must be too
    return folder


def open_process(run_dir: Path, process_id: str, clock: Clock = utc_now) -> tuple[Engine, FolderStore]:
    folder = run_dir / process_id
    meta = read_meta(folder)
    plan = _plan(folder, meta)
    store = FolderStore(folder, plan, meta)
    workspace = Path(meta.get("workspace") or ".")
    engine = Engine(store, workspace, {"id": meta["workflow_id"], "title": plan.title}, clock)
    return engine, store


def _plan(folder: Path, meta: dict[str, Any]) -> RunPlan:
    plan = load_plan(folder / "plan", meta["workflow_id"], meta.get("title", meta["workflow_id"]))
    if meta.get("goal"):  # a caller's goal is the objective of the first todo_task step
        first = next((s for s in plan.steps if s.kind == "todo_task"), None)
        if first is not None:
            steps = tuple(replace(s, description=meta["goal"]) if s is first else s for s in plan.steps)
            plan = replace(plan, steps=steps)
    ready_file = folder / "plan" / "ready_tasks.json"
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


def read_meta(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "run.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError) as error:
        known = ", ".join(p.name for p in processes(folder.parent)) or "none"
        raise StoreError(f"no run `{folder.name}` in {folder.parent} (runs: {known})") from error


def ready_from_file(path: Path, plan: RunPlan) -> tuple[dict[str, tuple[Task, ...]], list[str]]:
    """`--tasks FILE`: a list (for the first todo_task step) or {step_id: list}."""
    from .plan import PlanError, parse_ready_tasks

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PlanError(f"cannot read {path}: {error}") from error
    if isinstance(data, list):
        first = next((s.id for s in plan.steps if s.kind == "todo_task"), None)
        if first is None:
            raise PlanError(f"{path}: the workflow has no todo_task step to take a checklist")
        data = {first: data}
    if not isinstance(data, dict):
        raise PlanError(f"{path}: a list of tasks, or an object mapping step ids to lists")
    ready, notes = {}, []
    for step_id, items in data.items():
        tasks, moved = parse_ready_tasks(items, f"{path.name}:{step_id}")
        ready[step_id] = tasks
        notes += [f"step `{step_id}`: {note}" for note in moved]
    return ready, notes


def all_metas(run_dir: Path) -> Iterable[tuple[Path, dict[str, Any]]]:
    for folder in processes(run_dir):
        try:
            yield folder, read_meta(folder)
        except (OSError, ValueError):
            continue


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
