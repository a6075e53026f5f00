"""The protocol `todoflow serve` offers, independent of the transport: the workflows a
server offers, and the calls its MCP tools make (start, step, the todo tools, status).

Every string the protocol takes is bounded (`LIMITS`, refused with the field and the
limit, and a NUL refused in any of them); a start prepared and never executed expires
after a day; a run's workspace is the server's (given by the caller: the CLI's working
folder unless named), or one inside it named at `prepare`; the server keeps at most
`OPEN_ENGINES` runs open (one per canonical process id; fewer under a low `ulimit -n`)
and closes the rest. Runs, and
starts prepared but not yet executed, live where the store location says (`process.runs_at`):
with a database, any number of servers serve the same runs, any of them any call.
"""

from __future__ import annotations

import errno
import json
import re
import resource
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from todoflow.dsl.diagnostics import TodoflowError, render_all

from .. import process
from ..agents import fast_path
from ..agents.llm_config import load_config
from ..definition import Reading, RunDefinition, read_definition, ready_checklists
from ..directive import Directive, PromptError
from ..engine import Engine, Refusal, Replayed
from ..llm_choice import LlmChoices, choices_from
from ..plan import PlanError, Task
from ..store.base import Runs, StartRecord, final_todos, runs_at
from ..views.card import card_data
from .handoff import Handoffs, elsewhere

BUILT_IN = Path(__file__).with_name("flows")
ALIASES = {"moira/todo-list": "todo-list"}
OPEN_ENGINES = 64  # runs a server keeps open at once; the least recently used are closed
FDS_PER_RUN = 3  # what an open run folder holds between calls: its journal, step lock, presence lock
FDS_KEPT = 32  # descriptors left to the rest of the server: the SDK, sockets, a step's own files
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)
START_TTL = 24 * 3600  # seconds a prepared start (and an executed start's claim) is kept
LIMITS = {  # characters of each string the protocol takes (a reply's own fields: the reply models)
    "workflowId": 200,
    "parentExecutionId": 200,
    "goal": 4_000,
    "startAttemptId": 100,
    "processId": 200,
    "attemptId": 100,
    "workspace": 1_000,
    "todo_id": 20,
}
PLAIN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ServeError(TodoflowError):
    """A request the server refuses, with the reason (becomes an MCP tool error)."""


def bounded(field: str, value: Any, required: bool = False) -> str | None:
    """`value` as a string of at most `LIMITS[field]` characters, or ServeError."""
    if value is None:
        if required:
            raise ServeError(f"{field} is missing")
        return None
    if not isinstance(value, str):
        raise ServeError(f"{field} must be a string, not {type(value).__name__}")
    if len(value) > LIMITS[field]:
        raise ServeError(f"{field} is {len(value):,} characters; at most {LIMITS[field]:,}")
    if "\0" in value:  # no path, id or database text can hold one: refused before it reaches them
        raise ServeError(f"{field} contains a NUL character (\\0), which it may not hold")
    return value


class Workflows:
    """The workflows a server offers, by workflow id: `*.todoflow` files and `*/plan.json`
    plans (legacy nested ones too) in its folders. A file that does not compile — or
    cannot be read at all — keeps its diagnostics and stops nothing; two files declaring
    one workflow id are both refused, each naming the other."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.sources: dict[str, Path] = {}
        self.broken: dict[str, str] = {}  # workflow id (or file stem) -> why it cannot be offered
        self.notes: list[str] = []
        claimed: dict[str, Path] = {}
        for file in sorted(BUILT_IN.glob("*.todoflow")):
            self._add(file, claimed)
        for folder in folders:
            for file in [*sorted(folder.glob("*.todoflow")), *sorted(folder.glob("*/plan.json"))]:
                self._add(file, claimed)

    def _add(self, file: Path, claimed: dict[str, Path]) -> None:
        try:
            workflow_id = self.read(file).or_raise().workflow_id
        except (TodoflowError, RecursionError, OSError) as error:  # one bad file stops nothing else
            workflow = _declared_id(file) or _folder_id(file)
            self.broken.setdefault(workflow, f"workflow `{workflow}` does not compile:\n{_message(error)}")
            return
        other = claimed.get(workflow_id)
        if other is not None and other.parent != BUILT_IN:
            self.sources.pop(workflow_id, None)
            self.broken[workflow_id] = (
                f"workflow id `{workflow_id}` is declared by both {other} and {file}; rename one of them"
            )
            return
        if other is not None:
            self.notes.append(f"{file} replaces the built-in workflow `{workflow_id}`")
        claimed[workflow_id] = file
        if workflow_id not in self.broken:
            self.sources[workflow_id] = file

    def ids(self) -> list[str]:
        return sorted(self.sources)

    def offer(self, workflow_id: str) -> Reading:
        workflow_id = ALIASES.get(workflow_id, workflow_id)
        if workflow_id in self.broken:
            raise ServeError(self.broken[workflow_id])
        if workflow_id not in self.sources:
            raise ServeError(f"no workflow `{workflow_id}`; this server offers {', '.join(self.ids())}")
        return self.read(self.sources[workflow_id])  # read again: it may have changed on disk

    @staticmethod
    def read(file: Path) -> Reading:
        reading = read_definition(file)
        if reading.definition is None:
            raise ServeError(render_all(reading.diagnostics, reading.sources).rstrip("\n"))
        return reading


def _message(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "the file nests too deeply to read"
    if isinstance(error, OSError):
        return f"cannot read it: {error.strerror or error}"
    return str(error)


def _folder_id(file: Path) -> str:
    return file.parent.name if file.name == "plan.json" else file.stem


def _declared_id(file: Path) -> str | None:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^\s*workflow\s+([a-z][a-z0-9_-]*)", text, re.M)
    return match.group(1) if match else None


class _Open(NamedTuple):
    """A run a server has open, and the presence that says it is driven while it is."""

    engine: Engine
    presence: AbstractContextManager[None]
    users: int

    def close(self) -> None:
        self.presence.__exit__(None, None, None)
        self.engine.close()


def open_limit() -> int:
    """The runs a server keeps open: `OPEN_ENGINES`, fewer when the process may open few
    files (`ulimit -n`): each open run folder holds `FDS_PER_RUN` descriptors between calls."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return OPEN_ENGINES
    return max(1, min(OPEN_ENGINES, (soft - FDS_KEPT) // FDS_PER_RUN))


def out_of_files(error: OSError, open_runs: int) -> ServeError:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ServeError(
        f"the server has run out of open files ({error.strerror}; ulimit -n is {soft}, {open_runs} runs "
        "open): send the call again (or ask `status` where the run is), or raise the server's limit"
    )


class _Engines:
    """The runs a server has open: at most `open_limit()`, one per canonical process id,
    the least recently used closed first (never one that a call is using). A run is
    `running` while a server has it open. Out of descriptors, the idle runs are closed
    and the opening tried once more before the call is refused (and the server goes on)."""

    def __init__(self, runs: Runs) -> None:
        self.runs = runs
        self.limit = open_limit()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def use(self, process_id: str) -> Iterator[Engine]:
        key = canonical(process_id)
        with self._lock:
            found = self._open.pop(key, None) or self._open_run(key)
            self._open[key] = found._replace(users=found.users + 1)
            self._evict()
        try:
            yield found.engine
        finally:
            with self._lock:
                current = self._open.get(key, found)
                self._open[key] = current._replace(users=current.users - 1)
                self._evict()

    def _open_run(self, key: str) -> _Open:
        for last in (False, True):
            try:
                return self._opened(process.resume_process(self.runs, key))  # a driver: repaired
            except TodoflowError as error:
                raise ServeError(str(error)) from None
            except OSError as error:
                if error.errno not in OUT_OF_FILES:
                    raise
                if last:
                    raise out_of_files(error, len(self._open)) from None
                self._evict(keep=0)  # the idle runs give their descriptors back
        raise AssertionError("unreachable")

    def _opened(self, engine: Engine) -> _Open:
        presence = self.runs.driving(engine.process_id)
        presence.__enter__()
        return _Open(engine, presence, 0)

    def add(self, engine: Engine) -> None:
        with self._lock:
            self._open[canonical(engine.process_id)] = self._opened(engine)
            self._evict()

    def __len__(self) -> int:
        return len(self._open)

    def cached(self, process_id: str) -> Engine | None:
        with self._lock:
            found = self._open.get(canonical(process_id))
            return found.engine if found else None

    def _evict(self, keep: int | None = None) -> None:
        idle = [key for key, found in self._open.items() if found.users == 0]
        for key in idle[: max(0, len(self._open) - (self.limit if keep is None else keep))]:
            self._open.pop(key).close()

    def close(self) -> None:
        with self._lock:
            for found in self._open.values():
                found.close()
            self._open.clear()


def canonical(process_id: str) -> str:
    """A process id as its run folder is named; anything else names no run."""
    if not PLAIN_ID.match(process_id):
        raise ServeError(f"no run `{process_id}`: a process id is a plain name")
    return process_id


class TodoService:
    """The protocol, independent of the transport: what the MCP tools call."""

    def __init__(
        self,
        workflows: Workflows,
        where: Path | str | Runs,
        workspace: Path,
        learnings: Path | None = None,
        models: tuple[str | None, str | None] = (None, None),
        peers: bool = False,
    ) -> None:
        """`models`: the server's `--llm` and `--preset-llm` (None: the environment's, then
        each workflow's configuration file); `peers`: other processes serve the same runs
        (`serve --workers`)."""
        self.models = models
        choices_from(models[1], models[0])  # a malformed model refused at start-up, not at a start
        self.workflows, self.runs = workflows, runs_at(where)
        self.workspace = workspace.resolve()  # the CLI's working folder unless named: never guessed here
        self.learnings = learnings
        self.engines = _Engines(self.runs)
        self.starts = self.runs.starts()
        self.handoffs = Handoffs(peers)  # learn_code fast paths this server runs

    # -- start ---------------------------------------------------------------------------

    def prepare(
        self,
        workflow_id: Any,
        parent: Any,
        tasks: Any,
        goal: Any,
        workspace: Any = None,
        fast_path_only: Any = None,
    ) -> dict[str, Any]:
        workflow = bounded("workflowId", workflow_id, required=True)
        assert workflow is not None
        if fast_path_only is not None and not isinstance(fast_path_only, bool):
            raise ServeError("fastPathOnly: true or false")
        parent_id = bounded("parentExecutionId", parent) or "none"
        goal = bounded("goal", goal)
        folder = self._workspace(bounded("workspace", workspace))
        reading = self.workflows.offer(workflow)
        definition = reading.or_raise()
        notes = reading.notes
        count = None
        if tasks is not None:
            ready, moved = self._ready(definition, tasks)
            notes += moved
            count = sum(len(checklist) for checklist in ready.values())
        self.starts.expire(START_TTL)
        start_id = f"start-{secrets.token_hex(8)}"
        record = StartRecord(
            workflow_id=definition.workflow_id,
            parent_execution_id=parent_id,
            tasks=tasks,
            goal=goal,
            workspace=str(folder),
            fast_path_only=bool(fast_path_only),
        )
        self.starts.prepare(start_id, record)
        steps = [{"id": s.id, "type": s.kind, "title": s.title} for s in definition.plan.steps]
        return {
            "startAttemptId": start_id,
            "workflowId": definition.workflow_id,
            "title": definition.title,
            "steps": steps,
            "taskCount": count,
            "notes": notes,
            "workspace": str(folder),
            "fastPathOnly": bool(fast_path_only),
        }

    def _workspace(self, given: str | None) -> Path:
        """The server's workspace, or a folder inside it (resolved, symlinks included)."""
        if given is None:
            return self.workspace
        folder = (self.workspace / given).resolve()
        if not folder.is_relative_to(self.workspace):
            raise ServeError(f"workspace `{given}` is outside the server's workspace {self.workspace}")
        if not folder.is_dir():
            raise ServeError(f"workspace `{given}` is not a folder in the server's workspace")
        return folder

    @staticmethod
    def _ready(definition: RunDefinition, tasks: Any) -> tuple[dict[str, tuple[Task, ...]], list[str]]:
        """The checklist for the workflow's first todo_task step, and its notes."""
        if not isinstance(tasks, list):
            raise ServeError("tasks: a checklist is a list of tasks")
        try:
            ready, notes = ready_checklists(definition, tasks, "tasks")
            return ready, [note for _, note in notes]
        except PlanError as error:
            raise ServeError(str(error)) from None

    def execute(self, start_id: Any) -> dict[str, Any]:
        name = bounded("startAttemptId", start_id, required=True)
        assert name is not None
        if not PLAIN_ID.match(name):
            raise ServeError(f"unknown startAttemptId `{name}`: call start with action `prepare` first")
        done = self.starts.executed(name)
        if done is not None:
            raise ServeError(f"startAttemptId `{name}` was executed already (process `{done}`)")
        record = self.starts.record(name)
        if record is None:
            raise ServeError(f"unknown startAttemptId `{name}`: call start with action `prepare` first")
        definition = self.workflows.offer(record.workflow_id).or_raise()
        ready = None if record.tasks is None else self._ready(definition, record.tasks)[0]
        llms = self._llms(definition)
        if not self.starts.claim(name):  # a start attempt executes once, across servers too
            raise ServeError(f"startAttemptId `{name}` was executed already")
        try:
            engine = process.start(
                definition,
                self.runs,
                workspace=Path(record.workspace or self.workspace),
                ready=ready,
                goal=record.goal,
                parent_execution_id=record.parent_execution_id,
                start_attempt_id=name,
                learnings=self.learnings,
                agent="mcp",
                fast_path_only=record.fast_path_only,
                llms=llms,
            )
        except BaseException:
            self.starts.release(name)
            raise
        self.starts.done(name, engine.process_id)
        self.engines.add(engine)
        with self.engines.use(engine.process_id) as engine:
            return self._advance(engine, engine.directive())

    def _llms(self, definition: RunDefinition) -> LlmChoices:
        """The preset's and the default model, as `todoflow run` finds them: the server's
        options, the environment, then the configuration found from the workflow's folder
        (a built-in workflow's: from the server's workspace)."""
        folder = Path(definition.source).parent
        try:
            return load_config(self.workspace if folder == BUILT_IN else folder, *self.models).choices
        except TodoflowError as error:
            raise ServeError(str(error)) from None

    # -- steps and the todo tools ---------------------------------------------------------

    def step(self, process_id: Any, attempt: Any, reply: dict[str, Any]) -> dict[str, Any]:
        """One reply (or todo tool call, `{tool: arguments}`) to the current directive."""
        pid = bounded("processId", process_id, required=True)
        attempt_id = bounded("attemptId", attempt, required=True)
        assert pid is not None and attempt_id is not None
        with self.engines.use(pid) as engine:
            try:
                return self._advance(engine, engine.step(attempt_id, reply))
            except Replayed as replayed:  # applied before: the answer the client lost
                return self._advance(engine, replayed.directive) | {"replayed": True}
            except Refusal as refusal:
                directive = self._advance(engine, refusal.directive, wait=0)  # a refusal does not wait
                current = json.dumps(directive, ensure_ascii=False, indent=2)
                raise ServeError(
                    f"refused: {refusal.reason}; nothing changed.\ncurrent directive: {current}"
                ) from None

    def todos(self, process_id: Any, todo_id: Any = None) -> dict[str, Any]:
        """`list_todos` (every todo of the current step) and `get_todo` (one of them)."""
        pid = bounded("processId", process_id, required=True)
        wanted = bounded("todo_id", todo_id)
        assert pid is not None
        with self.engines.use(pid) as engine:
            try:
                listed: dict[str, Any] = json.loads(engine.todos())
            except TodoflowError as error:
                raise ServeError(str(error)) from None
        if wanted is None:
            return listed
        found = next((todo for todo in listed["todos"] if todo["id"] == wanted), None)
        if found is None:
            raise ServeError(f"there is no `{wanted}` in step `{listed['step_id']}`")
        return {"step_id": listed["step_id"], "todo": found}

    # -- status ------------------------------------------------------------------------

    def status(self, process_id: Any) -> dict[str, Any]:
        if process_id is not None:
            pid = bounded("processId", process_id, required=True)
            assert pid is not None
            with self.engines.use(pid) as engine:
                advanced = self._advance(engine, engine.directive())
                directive = engine.directive()
                state = directive.status(self.runs.driven(pid))
                finished = final_todos(engine.store, directive.state.completed_steps)
            return card_data(directive, finished, state) | {"directive": advanced}
        runs = [self._run_row(pid, meta) for pid, meta in self.runs.metas()]
        problems = [why for _, why in sorted(self.workflows.broken.items())]
        return {
            "runs": runs,
            "workflows": self.workflows.ids(),
            "problems": problems,
            "notes": self.workflows.notes,
        }

    def _run_row(self, process_id: str, meta: Any) -> dict[str, Any]:
        """One run of the listing, read without keeping its files open (a listing may name
        thousands of runs); one that cannot be read is `damaged` and the listing goes on."""
        row: dict[str, Any] = {"processId": process_id, "workflowId": None}
        try:
            if isinstance(meta, TodoflowError):
                raise meta
            row["workflowId"] = meta.workflow_id
            cached = self.engines.cached(process_id)
            if cached is not None:
                directive = cached.directive()
                state = directive.status(True)
            else:
                with process.open_process(self.runs, process_id)[0] as engine:
                    directive = engine.directive()
                    state = directive.status(self.runs.driven(process_id))
        except TodoflowError as error:
            return row | {"completed": False, "status": "damaged", "problem": str(error)}
        return row | {"completed": directive.completed, "status": state, "role": directive.role}

    def _advance(self, engine: Engine, directive: Directive, wait: float | None = None) -> dict[str, Any]:
        """The directive a call answers with. At a learn_code step this server runs the
        fast path (`handoff`): the call returns the script's next delegation for the client
        to answer, or — the script still busy after a while — the directive as it stands
        with `fastPath: running`; once the script has ended, what follows it."""
        handoff = self.handoffs.get(engine.process_id)
        if handoff is None:
            try:
                step, directive = fast_path.due(engine, directive, engine.fast_path_only)
            except fast_path.FastPathRunning as running:
                return self._elsewhere(engine, running, wait)
            except fast_path.FastPathError as error:
                raise ServeError(f"{error}\n{self._kept(engine)}") from None
            if step is None:
                return self._directive(directive)
            handoff = self.handoffs.begin(engine, step, self.engines.use(engine.process_id), self.runs)
        else:
            handoff.answered()
        ready = handoff.wait(wait)
        if not handoff.ended:
            return self._running(engine.directive(), handoff.step.id, ready)
        self.handoffs.end(handoff)
        if handoff.error is not None:
            raise ServeError(f"{handoff.error}\n{self._kept(engine)}")
        return self._advance(engine, engine.directive())  # the next step, or this one afresh

    def _elsewhere(
        self, engine: Engine, running: fast_path.FastPathRunning, wait: float | None
    ) -> dict[str, Any]:
        """The step's fast path runs in another program. Over a shared store, or with
        several worker processes, that is another instance serving this run: the call
        waits for its script as for one of this server's (`elsewhere`), and goes on once
        the attempt has ended."""
        if not self.handoffs.elsewhere_too(engine) or wait == 0:
            return self._directive(engine.directive()) | {"fastPath": "running", "note": str(running)}
        directive = elsewhere(engine, self.runs, wait)
        step = directive.step.id if directive.step else ""
        if directive.state.fast_path == "running" and not fast_path.abandoned(engine, here=False):
            return self._running(directive, step, directive.node == "delegated")
        failure = fast_path.last_failure(engine) if directive.state.fast_path == "failed" else None
        if failure is not None and engine.fast_path_only:  # the attempt waited for failed: no fallback
            raise ServeError(f"{failure}\n{self._kept(engine)}")
        return self._advance(engine, directive, wait)  # what follows the attempt, or its runner gone

    def _running(self, directive: Directive, step: str, ready: bool) -> dict[str, Any]:
        """The directive while a fast path runs: its delegation, or a note that the script
        is still working."""
        reply = self._directive(directive) | {"fastPath": "running"}
        if not ready:
            reply["note"] = (
                f"the learn_code script of step `{step}` is still working; call `status` "
                "with this processId for its next delegation"
            )
        return reply

    @staticmethod
    def _kept(engine: Engine) -> str:
        return (
            f"run `{engine.process_id}` is kept: fix the script, then call `status` with its "
            "processId to try the fast path again"
        )

    def _directive(self, directive: Directive) -> dict[str, Any]:
        try:
            return directive.to_json()
        except PromptError as error:
            raise ServeError(str(error)) from None

    def close(self) -> None:
        self.handoffs.stop()  # scripts stopped, their failure journaled, before the runs close
        self.engines.close()
