"""`todoflow serve`: the Todo List protocol as MCP tools, for any MCP client.

Three tools over one passive engine: `start` (prepare, then execute once), `step` (one
reply for the current node) and `status`. The external agent is the driver: each
`step` call is one engine step. Runs live in the same run folders as `todoflow run`,
so `todoflow status` shows them and a new server continues a run a killed one left.
Only this module imports the `mcp` SDK (the optional `mcp` extra).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from todoflow.compiler.files import write_atomically
from todoflow.dsl.diagnostics import TodoflowError, render_all

from . import process
from .card import card_data
from .definition import Reading, RunDefinition, read_definition, ready_checklists
from .directive import Directive, PromptError
from .engine import Engine, Refusal
from .plan import PlanError, Task
from .replies import IntakeReply, RevisionReply, TaskItem, TeleportReply, WorkReply
from .store import StoreError

BUILT_IN = Path(__file__).with_name("flows")
ALIASES = {"moira/todo-list": "todo-list"}


class ServeError(TodoflowError):
    """A request the server refuses, with the reason (becomes an MCP tool error)."""


def _schema(model: type, field: str) -> dict[str, Any]:
    """The JSON Schema of one field of a reply model, for a tool's published input schema."""
    schema = dict(model.model_json_schema()["properties"][field])  # type: ignore[attr-defined]
    schema.pop("title", None)
    return schema


_TASK = {k: v for k, v in TaskItem.model_json_schema().items() if k in ("type", "properties", "required")}
_TASKS = {
    "type": "array",
    "items": _TASK,
    "minItems": 1,
    "maxItems": 100,
    "description": "The checklist, in order: 1 to 100 tasks, each {action, expected_result}.",
}


def _optional(schema: dict[str, Any]) -> Any:
    return WithJsonSchema({"anyOf": [schema, {"type": "null"}], "default": None})


class Workflows:
    """The workflows a server offers, by workflow id: `*.todoflow` files and `*/plan.json`
    plans (legacy nested ones too) in its folders. A broken one keeps its diagnostics."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.sources: dict[str, Path] = {}
        self.broken: dict[str, str] = {}  # workflow id (or file stem) -> rendered diagnostics
        files = [*sorted(BUILT_IN.glob("*.todoflow"))]
        for folder in folders:
            files += [*sorted(folder.glob("*.todoflow")), *sorted(folder.glob("*/plan.json"))]
        for file in files:
            try:
                definition = self.load(file)
            except ServeError as error:
                self.broken[_declared_id(file) or _folder_id(file)] = str(error)
            else:
                self.sources[definition.workflow_id] = file
                self.broken.pop(definition.workflow_id, None)

    def ids(self) -> list[str]:
        return sorted(self.sources)

    def offer(self, workflow_id: str) -> Reading:
        workflow_id = ALIASES.get(workflow_id, workflow_id)
        if workflow_id in self.broken:
            raise ServeError(f"workflow `{workflow_id}` does not compile:\n{self.broken[workflow_id]}")
        if workflow_id not in self.sources:
            raise ServeError(f"no workflow `{workflow_id}`; this server offers {', '.join(self.ids())}")
        return self.read(self.sources[workflow_id])  # read again: it may have changed on disk

    @staticmethod
    def read(file: Path) -> Reading:
        reading = read_definition(file)
        if reading.definition is None:
            raise ServeError(render_all(reading.diagnostics, reading.sources))
        return reading

    @classmethod
    def load(cls, file: Path) -> RunDefinition:
        return cls.read(file).or_raise()


def _folder_id(file: Path) -> str:
    return file.parent.name if file.name == "plan.json" else file.stem


def _declared_id(file: Path) -> str | None:
    import re

    match = re.search(
        r"^\s*workflow\s+([a-z][a-z0-9_-]*)", file.read_text(encoding="utf-8", errors="replace"), re.M
    )
    return match.group(1) if match else None


class TodoService:
    """The protocol, independent of the transport: what the MCP tools call."""

    def __init__(self, workflows: Workflows, run_dir: Path) -> None:
        self.workflows, self.run_dir = workflows, run_dir
        self._engines: dict[str, Engine] = {}
        self._lock = threading.Lock()

    # -- start ---------------------------------------------------------------------------

    def prepare(self, workflow_id: str, parent: str, tasks: Any, goal: str | None) -> dict[str, Any]:
        reading = self.workflows.offer(workflow_id)
        definition = reading.or_raise()
        notes = reading.notes
        count = None
        if tasks is not None:
            ready, moved = self._ready(definition, tasks)
            notes += moved
            count = sum(len(checklist) for checklist in ready.values())
        start_id = f"start-{secrets.token_hex(8)}"
        record = {
            "workflowId": definition.workflow_id,
            "parentExecutionId": parent,
            "tasks": tasks,
            "goal": goal,
        }
        write_atomically(self._starts() / f"{start_id}.json", json.dumps(record, ensure_ascii=False) + "\n")
        steps = [{"id": s.id, "type": s.kind, "title": s.title} for s in definition.plan.steps]
        return {
            "startAttemptId": start_id,
            "workflowId": definition.workflow_id,
            "title": definition.title,
            "steps": steps,
            "taskCount": count,
            "notes": notes,
        }

    @staticmethod
    def _ready(definition: RunDefinition, tasks: Any) -> tuple[dict[str, tuple[Task, ...]], list[str]]:
        """The checklist for the workflow's first todo_task step, and its notes."""
        try:
            ready, notes = ready_checklists(definition, tasks, "tasks")
            return ready, [note for _, note in notes]
        except PlanError as error:
            raise ServeError(str(error)) from None

    def execute(self, start_id: str) -> dict[str, Any]:
        record_file = self._starts() / f"{Path(start_id).name}.json"
        try:
            record = json.loads(record_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ServeError(
                f"unknown startAttemptId `{start_id}`: call start with action `prepare` first"
            ) from None
        executed = self._starts() / f"{Path(start_id).name}.executed"
        if executed.exists():
            done = executed.read_text(encoding="utf-8").strip()
            raise ServeError(f"startAttemptId `{start_id}` was executed already (process `{done}`)")
        definition = self.workflows.offer(record["workflowId"]).or_raise()
        ready = None if record["tasks"] is None else self._ready(definition, record["tasks"])[0]
        try:  # a start attempt executes once, across servers too: the first to claim it
            claim = os.open(executed, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            raise ServeError(f"startAttemptId `{start_id}` was executed already") from None
        try:
            engine = process.start(
                definition,
                self.run_dir,
                workspace=Path.cwd(),
                ready=ready,
                goal=record["goal"],
                parent_execution_id=record["parentExecutionId"],
                start_attempt_id=start_id,
            )
            os.write(claim, engine.process_id.encode())
        except BaseException:
            executed.unlink(missing_ok=True)
            raise
        finally:
            os.close(claim)
        with self._lock:
            self._engines[engine.process_id] = engine
        return self._directive(engine.directive())

    def _starts(self) -> Path:
        folder = self.run_dir / ".starts"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    # -- step and status ---------------------------------------------------------------

    def step(self, process_id: str, attempt: str, reply: dict[str, Any]) -> dict[str, Any]:
        engine = self._engine(process_id)
        try:
            return self._directive(engine.step(attempt, reply))
        except Refusal as refusal:
            current = json.dumps(self._directive(refusal.directive), ensure_ascii=False, indent=2)
            raise ServeError(
                f"refused: {refusal.reason}; nothing changed.\ncurrent directive: {current}"
            ) from None

    def status(self, process_id: str | None) -> dict[str, Any]:
        if process_id is not None:
            directive = self._engine(process_id).directive()
            finished = process.final_todos(self.run_dir / process_id, directive.state.completed_steps)
            return card_data(directive, finished) | {"directive": self._directive(directive)}
        runs = []
        for folder, meta in process.all_metas(self.run_dir):
            row: dict[str, Any] = {"processId": folder.name, "workflowId": None}
            try:
                if isinstance(meta, StoreError):
                    raise meta
                row["workflowId"] = meta.workflow_id
                directive = self._peek(folder.name)
                row |= {"completed": directive.completed, "role": directive.role}
            except (StoreError, PlanError) as error:
                row |= {"completed": False, "status": "damaged", "problem": str(error)}
            runs.append(row)
        return {"runs": runs, "workflows": self.workflows.ids()}

    def _peek(self, process_id: str) -> Directive:
        """The current directive of a process, without keeping its files open (a listing
        may name thousands of runs)."""
        with self._lock:
            cached = self._engines.get(process_id)
        if cached is not None:
            return cached.directive()
        with process.open_process(self.run_dir, process_id)[0] as engine:
            return engine.directive()

    def _engine(self, process_id: str) -> Engine:
        with self._lock:
            if process_id not in self._engines:
                try:
                    self._engines[process_id] = process.open_process(self.run_dir, process_id)[0]
                except TodoflowError as error:
                    raise ServeError(str(error)) from None
            return self._engines[process_id]

    def _directive(self, directive: Directive) -> dict[str, Any]:
        try:
            return directive.to_json()
        except PromptError as error:
            raise ServeError(str(error)) from None

    def close(self) -> None:
        with self._lock:
            for engine in self._engines.values():
                engine.close()
            self._engines.clear()


def build_server(service: TodoService) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(
        "todoflow",
        instructions=(
            "Todo List workflows: call `start` with action `prepare` (a workflowId; optionally a ready "
            "checklist in `tasks`), then `start` with action `execute`; then call `step` once per directive "
            "with its processId and attemptId. Do each task and check its expected result before confirming "
            "it with evidence. If a task is blocked, do not call step. If the checklist is wrong, send "
            "teleportTo 'teleport-revise-tasks'."
        ),
    )

    def guarded(call: Any) -> dict[str, Any]:
        try:
            return call()  # type: ignore[no-any-return]
        except ServeError as error:
            raise ToolError(str(error)) from None

    @server.tool(
        description="Start a workflow: `prepare` it (returns a startAttemptId), then `execute` it once."
    )
    def start(
        action: Annotated[
            Literal["prepare", "execute"], Field(description="`prepare` first, then `execute`.")
        ],
        workflowId: Annotated[  # noqa: N803 - the protocol's names
            str | None, Field(description="For prepare: the workflow, e.g. `todo-list`.")
        ] = None,
        parentExecutionId: Annotated[  # noqa: N803
            str | None, Field(description="For prepare: the caller's execution id, or `none`.")
        ] = None,
        tasks: Annotated[
            list[dict[str, Any]] | None,
            _optional(
                _TASKS
                | {
                    "description": "For prepare: a ready checklist for the first todo_task step, passed on "
                    "unchanged; items may add `constraints`, and `label` + `after` to order them."
                }
            ),
        ] = None,
        goal: Annotated[
            str | None, Field(description="For prepare: the goal to compose a checklist from.")
        ] = None,
        startAttemptId: Annotated[  # noqa: N803
            str | None, Field(description="For execute: the id prepare returned.")
        ] = None,
    ) -> dict[str, Any]:
        if action == "prepare":
            if not workflowId:
                raise ToolError("prepare needs workflowId")
            return guarded(lambda: service.prepare(workflowId, parentExecutionId or "none", tasks, goal))
        if not startAttemptId:
            raise ToolError("execute needs startAttemptId")
        return guarded(lambda: service.execute(startAttemptId))

    @server.tool(
        description=(
            "Apply one reply to the current node of a process. "
            "intake: `tasks` + `progress_checklist_outcome`. "
            "work: `evidence` + `progress_execution_outcome` after doing and checking the task, or "
            "`teleportTo: teleport-revise-tasks` when the checklist is wrong. revise: `tasks`, "
            "`resume_from_task`, `progress_checklist_outcome`, `progress_execution_outcome`. "
            "Returns the next directive, or {completed: true, result: {}}."
        )
    )
    def step(
        processId: Annotated[str, Field(description="The process, from start execute.")],  # noqa: N803
        attemptId: Annotated[str, Field(description="The attemptId of the current directive.")],  # noqa: N803
        tasks: Annotated[list[dict[str, Any]] | None, _optional(_TASKS)] = None,
        progress_checklist_outcome: Annotated[
            str | None, _optional(_schema(IntakeReply, "progress_checklist_outcome"))
        ] = None,
        evidence: Annotated[str | None, _optional(_schema(WorkReply, "evidence"))] = None,
        progress_execution_outcome: Annotated[
            str | None, _optional(_schema(WorkReply, "progress_execution_outcome"))
        ] = None,
        teleportTo: Annotated[str | None, _optional(_schema(TeleportReply, "teleportTo"))] = None,  # noqa: N803
        resume_from_task: Annotated[int | None, _optional(_schema(RevisionReply, "resume_from_task"))] = None,
    ) -> dict[str, Any]:
        given = {
            "tasks": tasks,
            "progress_checklist_outcome": progress_checklist_outcome,
            "evidence": evidence,
            "progress_execution_outcome": progress_execution_outcome,
            "teleportTo": teleportTo,
            "resume_from_task": resume_from_task,
        }
        reply = {k: v for k, v in given.items() if v is not None}
        return guarded(lambda: service.step(processId, attemptId, reply))

    @server.tool(description="The run card of a process (Checklist -> Prepare -> Work), or every run.")
    def status(
        processId: Annotated[str | None, Field(description="A process id; omit to list runs.")] = None,  # noqa: N803
    ) -> dict[str, Any]:
        return guarded(lambda: service.status(processId))

    return server


def serve(folders: list[Path], run_dir: Path) -> None:
    service = TodoService(Workflows(folders), run_dir)
    try:
        build_server(service).run("stdio")
    finally:
        service.close()
