"""The store's port: what the core asks of the place runs live, and the values it trades.

Three protocols, each with one adapter per backend beside this module (`folder.py`,
`memory.py`, `postgres.py`), held to one contract suite (tests/runtime/store/):

- `Store`: one run's journal. `locked()` holds the process for one step and yields its
  state; `commit()` makes a step's entries durable, all or none; `replayed()` tells a
  retried reply from a stale one; `entries(after)` reads the journal, typed.
- `Runs`: a store location (a folder of run folders, a database, memory): creating,
  opening, listing and moving runs, who drives them, their learnings and MCP starts.
- `LearningStore`: the learnings records of a location.

An adapter registers the location schemes it serves (`register`); `runs_at(where)` picks
it: a path is a folder of run folders, `scheme://…` the adapter of that scheme (looked up,
if it has not registered yet, under the `todoflow.stores` entry points, so a backend in
another package is a new module, never an edit here). This module is the core's own
vocabulary: the core imports it and no adapter.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import pydantic_core
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from todoflow.compiler.formats import Todos
from todoflow.dsl.diagnostics import TodoflowError

from ..entries import Entry, EntryFormatError, entry_from_json
from ..learnings import Learning
from ..plan import RunPlan, Task
from ..state import Applied, ProcessState

SNAPSHOT_EVERY = 1000  # a store keeps the state at least every this many entries: loading replays fewer
SNAPSHOT_BYTES = 8192  # and once this much journal (or the snapshot's size, if larger) was written since
READY = "ready_tasks.json"  # the caller's ready checklists, beside the plan files of a run


class StoreError(TodoflowError):
    """A store location or run that cannot be used, with the reason."""


class DamagedRun(StoreError):
    """A run whose journal does not hold what its other records say happened."""


class Moved(StoreError):
    """Another program committed to the process first: the step is taken again from the
    current state (the engine does; it never reaches a caller)."""


class Request:
    """A reply as a step received it: its attempt id, what it said and who said it. A store
    that records requests keeps the digest (computed only when one asks)."""

    __slots__ = ("_digest", "attempt", "by", "data")

    def __init__(self, attempt: str, data: Mapping[str, Any], by: str) -> None:
        self.attempt, self.data, self.by = attempt, data, by
        self._digest: str | None = None

    @property
    def digest(self) -> str:
        if self._digest is None:
            text = json.dumps(
                {"by": self.by, "reply": self.data}, sort_keys=True, ensure_ascii=False, default=str
            )
            self._digest = hashlib.sha256(text.encode()).hexdigest()
        return self._digest


class RunMeta(BaseModel):
    """run.json: who the process is. Written once, when the run starts."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    process_id: str
    workflow_id: str
    started_at: str
    title: str = ""
    source: str = ""  # the file the definition was read from, resolved, or `<string>`
    source_sha256: str | None = None
    plan_sha256: str | None = None  # of the plan files stored with the run (`plan.files_sha256`)
    workspace: str = "."
    parent_execution_id: str | None = None
    start_attempt_id: str | None = None
    goal: str | None = None  # a caller's goal: the objective of the first todo_task step
    learnings: str | None = None  # the learnings folder, resolved
    llm: str | None = None  # the runtime default model, `PROVIDER:MODEL`
    preset_llm: str | None = None  # the preset's model
    agent: str | None = None  # what drives the run: `human`, `scripted:FILE`, `llm`, `mcp`
    fast_path_only: bool = False  # learn_code: a missing or failing script is an error, no fallback
    config: str | None = None  # the configuration file the LLM agent read (todoflow.toml), resolved
    config_sha256: str | None = None  # its sha256 then: a resume says when it changed
    max_turns: int | None = None  # `run --max-turns` at the start: every todo_task step's bound

    def text(self) -> str:
        """run.json's text."""
        return self.model_dump_json(indent=2, exclude_none=True) + "\n"


class StartRecord(BaseModel):
    """An MCP start prepared and not yet executed: what `execute` will start (records
    prepared before this model read by their MCP names too)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    workflow_id: str = Field(validation_alias=AliasChoices("workflow_id", "workflowId"))
    parent_execution_id: str = Field(
        validation_alias=AliasChoices("parent_execution_id", "parentExecutionId")
    )
    tasks: list[Any] | None = None  # the caller's checklist as given (checked again at execute)
    goal: str | None = None
    workspace: str | None = None
    fast_path_only: bool = Field(False, validation_alias=AliasChoices("fast_path_only", "fastPathOnly"))


class RunRecord(NamedTuple):
    """A whole run as it moves between stores (`todoflow db export`/`import`): everything
    but what is derived from the journal."""

    process_id: str
    meta: str  # run.json's text
    files: dict[str, str]  # plan/'s files by their path inside it
    journal: list[str]  # the journal's lines, without their line ends
    learnings: list[tuple[str, str]]  # (sub-step id, line) of the run's learnings records, in order


def ready_text(ready: Mapping[str, tuple[Task, ...]]) -> str:
    """plan/ready_tasks.json: the caller's ready checklists by step id."""
    payload = {step: [task.as_dict() for task in tasks] for step, tasks in ready.items()}
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def snapshot_due(before: int, after: int, since: int = 0, size: int = 0) -> bool:
    """Whether a commit taking the journal from `before` to `after` entries keeps the state:
    once the journal written since the last snapshot (`since` bytes) costs about as much to
    replay as the snapshot (`size` bytes) costs to read, and at least every SNAPSHOT_EVERY
    entries. Opening a run then replays at most about a snapshot's worth of journal,
    however far from the last snapshot it stopped, and each step pays about one entry's
    replay for the snapshots written (bounded below by SNAPSHOT_BYTES: a small state is
    not rewritten at every few steps)."""
    return since >= max(size, SNAPSHOT_BYTES) or after // SNAPSHOT_EVERY > before // SNAPSHOT_EVERY


def in_order(
    lines: Iterable[str | bytes], after: int, damaged: Callable[[str, int], DamagedRun], source: str
) -> Iterator[Entry]:
    """The entries of `source`'s lines that follow entry `after`, each checked to be the
    next one: a line that is not an entry, or one out of order, is `damaged(problem, seq)`."""
    seq = after
    for number, line in enumerate(lines, start=1):
        try:  # pydantic's JSON reader: a quarter of `json.loads`'s cost on a journal line
            entry = entry_from_json(pydantic_core.from_json(line))
        except (ValueError, EntryFormatError):
            raise damaged(f"line {number} of {source} after entry {seq} is not an entry", seq) from None
        if entry.seq != seq + 1:
            raise damaged(f"{source}: entry {entry.seq} follows entry {seq}", seq)
        seq = entry.seq
        yield entry


class Store(Protocol):
    """One run's journal, the truth every other record of the run is derived from."""

    process_id: str
    plan: RunPlan
    started_at: str
    shared: bool  # other programs may commit between this store's looks (a database)

    def locked(self, cached: bool = False) -> contextlib.AbstractContextManager[ProcessState]:
        """Hold the process for one step; yields its current state (`cached`, in a shared
        store: the state it last knew, which `commit` verifies)."""
        ...

    def commit(self, steps: Sequence[Applied], after: ProcessState, request: Request | None = None) -> None:
        """Make entries durable, all or none (called inside `locked`); `after` is the state
        they lead to; `request` the reply that made them. Raises `Moved` if another
        program committed since `locked` read the state."""
        ...

    def replayed(self, request: Request) -> bool:
        """Whether this very reply, with this attempt id, was committed already."""
        ...

    def behind(self, state: ProcessState) -> bool:
        """Whether another program committed past `state` (only a shared store's can be)."""
        ...

    def entries(self, after: int = 0) -> list[Entry]:
        """The journal's entries after entry `after`, in order (reading only those)."""
        ...

    def alive(self, runner: str) -> bool | None:
        """Whether the program `runner` (`<host>:<pid>`, as a fast path's start names it)
        still holds its lease on this store; None when the store cannot tell (a run
        folder: the runner's own machine is asked)."""
        ...

    def close(self) -> None:
        """Release what the store holds (a store with derived files brings them up to date)."""
        ...


class LearningStore(Protocol):
    """The learnings records of a store location: one line per record or retirement."""

    location: str

    def add(self, learning: Learning) -> bool:
        """Append `learning` unless a record with its id is there; True when written."""
        ...

    def records(self, sub_step_id: str | None = None) -> list[Learning]:
        """Every record (of one sub-step, or of all), oldest first, each as its last line says."""
        ...

    def find(self, learning_id: str) -> Learning:
        """The record of an id as its last line says (`LearningError`: none)."""
        ...

    def retire(self, learning_id: str, at: str) -> Learning: ...

    def lines(self, process_id: str) -> list[tuple[str, str]]:
        """(sub-step id, line) of every line a process's records hold, in order."""
        ...

    def add_lines(self, lines: Iterable[tuple[str, str]]) -> None:
        """Append the lines that are not there yet: a record, or its retirement."""
        ...


@runtime_checkable
class Derived(Protocol):
    """A store that keeps files derived from the journal (events, todos), which a crash can
    leave behind it."""

    def repair(self, quick: bool = False) -> bool:
        """Bring the derived files up to the journal; True when something was rebuilt
        (`quick`: only if the ends of the files show a crash's mark)."""
        ...

    def gaps(self) -> list[str]:
        """What the derived files lack against the journal, one line each; reads only."""
        ...


class OpenRun(NamedTuple):
    meta: RunMeta
    store: Store
    learnings: LearningStore | None


class Starts(Protocol):
    """MCP `start`: prepared records, each executed once across every server."""

    def prepare(self, start_id: str, record: StartRecord) -> None: ...

    def executed(self, start_id: str) -> str | None:
        """The process an executed start made ('' while it is being made), or None."""
        ...

    def record(self, start_id: str) -> StartRecord | None: ...

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


class Runs(Protocol):
    """A store location: where runs are created, opened, listed, driven and moved."""

    location: str  # as messages name it (a database without its password)

    def create(
        self, files: Iterable[tuple[str, str]], meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
    ) -> None:
        """A new run, whole or not at all: its meta, plan files and ready checklists."""
        ...

    def load(self, process_id: str) -> OpenRun:
        """An existing run's meta, its store (holding its plan) and its learnings."""
        ...

    def read_meta(self, process_id: str) -> RunMeta: ...

    def metas(self) -> Iterator[tuple[str, RunMeta | StoreError]]:
        """Every run, newest first, with its meta or the error that says why it cannot be read."""
        ...

    def plan_file(self, process_id: str, relative: str) -> str | None:
        """A file of the run's stored plan (None: there is none)."""
        ...

    def learnings(self, meta: RunMeta | None) -> LearningStore | None:
        """Where a run's learnings are recorded (`meta` None: the location's own, if it keeps
        them itself). Run folders record into the learnings folder the run's meta names."""
        ...

    def starts(self) -> Starts:
        """MCP starts prepared and executed against these runs."""
        ...

    def driving(self, process_id: str) -> contextlib.AbstractContextManager[None]:
        """Say the run is being driven while inside (any number of programs may drive one
        run; `driven` says so to everybody)."""
        ...

    def driven(self, process_id: str) -> bool:
        """Whether a program drives the run now."""
        ...

    def remove(self, process_id: str) -> None:
        """The run gone: its meta, plan and journal (the location's learnings stay). The
        caller checks that nobody drives it (`todoflow runs rm` refuses a running run)."""
        ...

    def driver(self, process_id: str) -> str | None:
        """Who drives the run now, in words (`pid 4242 on build-7`), or None when nobody
        does (the last to start, when several do)."""
        ...

    def changes(self, process_id: str, seq: int) -> Iterator[None]:
        """Wakes (yields) whenever the run's journal may have grown past entry `seq`; the
        caller reads what is new by sequence number, so a missed wake costs nothing."""
        ...

    def export(self, process_id: str) -> RunRecord: ...

    def import_run(self, record: RunRecord) -> None: ...

    def ready(self) -> str | None:
        """None when the location can take a step now; else why not, in one line (a folder
        that cannot be written, a database out of reach or at another schema version)."""
        ...

    def close(self) -> None: ...


class FinalChecklist(NamedTuple):
    """A finished todo_task step's checklist as the journal leaves it: its todos.json, and
    its tasks, which hold what todos.json does not (each task's constraints)."""

    todos: Todos
    tasks: tuple[Task, ...]


def final_todos(store: Store, step_ids: Iterable[str]) -> dict[str, FinalChecklist]:
    """The final checklist of each finished todo_task step in `step_ids`, as the journal
    leaves it (display only): the same for every store, whatever derived files it keeps."""
    from ..events import todos
    from ..state import initial_state, replay

    wanted = set(step_ids)
    found: dict[str, FinalChecklist] = {}
    if not wanted:
        return found
    for applied in replay(store.plan, initial_state(store.plan, store.started_at), store.entries()):
        settled = applied.settled
        step = store.plan.step(settled.step_id or "")
        if settled.step_complete and step.id in wanted and step.kind == "todo_task":
            found[step.id] = FinalChecklist(Todos.model_validate_json(todos(step, settled)), settled.tasks)
    return found


# -- choosing the adapter of a location ---------------------------------------------------

Opener = Callable[[str], Runs]
_ADAPTERS: dict[str, tuple[Opener, bool]] = {}
_SHARED: dict[str, Runs] = {}  # locations whose adapter keeps one `Runs` per program (a pool)
_SHARED_LOCK = threading.Lock()
FOLDER = "file"  # the scheme of a plain path: a folder of run folders
ENTRY_POINTS = "todoflow.stores"


def register(*schemes: str, shared: bool = False) -> Callable[[Opener], Opener]:
    """Make `opener(location)` the `Runs` of locations with these schemes; `shared`: one
    `Runs` per location and program, given to every caller until it is closed (`forget`)."""

    def add(opener: Opener) -> Opener:
        for name in schemes:
            _ADAPTERS[name] = (opener, shared)
        return opener

    return add


def forget(location: str, runs: Runs) -> None:
    """A shared location's `Runs` is closed: the next `runs_at` opens it again."""
    with _SHARED_LOCK:
        if _SHARED.get(location) is runs:
            del _SHARED[location]


def scheme(location: str) -> str:
    """A location's scheme: `postgresql` for `postgresql://…`, `file` for a path."""
    head, found, _ = location.partition("://")
    return head.lower() if found and head.isalnum() else FOLDER


def without_password(location: str) -> str:
    """A `scheme://` location as messages show it: the password of its user part and a
    `password=` parameter left out, read as text (a URL too broken to parse still shows)."""
    head, found, rest = location.partition("://")
    if not found:
        return location
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    user, at, hosts = rest[:end].rpartition("@")
    name = user.partition(":")[0]
    tail = rest[end:]
    path, mark, query = tail.partition("?")
    if mark:
        kept = [p for p in query.split("&") if p.partition("=")[0].lower() != "password"]
        tail = path + ("?" + "&".join(kept) if kept else "")
    return f"{head}://{name}{at if name else ''}{hosts}{tail}"


def runs_at(where: Path | str | Runs) -> Runs:
    """The runs of a store location: a path (a folder of run folders) or a `scheme://` URL."""
    if not isinstance(where, Path | str):
        return where
    location = str(where)
    opener, shared = _adapter(FOLDER if isinstance(where, Path) else scheme(location))
    if not shared:
        return opener(location)
    with _SHARED_LOCK:
        found = _SHARED.get(location)
        if found is None:
            found = _SHARED[location] = opener(location)
        return found


def _adapter(kind: str) -> tuple[Opener, bool]:
    found = _ADAPTERS.get(kind)
    if found is None:
        for point in entry_points(group=ENTRY_POINTS, name=kind):
            try:
                point.load()  # the adapter's module registers itself
            except ImportError as error:
                extra = point.value.partition(":")[0].rpartition(".")[2]
                raise StoreError(
                    f"`{kind}://` locations need {error.name or 'a package that is missing'}: "
                    f"pip install 'todoflow[{extra}]'"
                ) from None
        found = _ADAPTERS.get(kind)
    if found is None:
        known = ", ".join(f"{name}://" for name in known_schemes())
        raise StoreError(f"no store serves `{kind}://` locations (a folder path, or {known})")
    return found


def known_schemes() -> list[str]:
    """The URL schemes some adapter serves (registered, or to be loaded by entry point)."""
    names = set(_ADAPTERS) | {point.name for point in entry_points(group=ENTRY_POINTS)}
    return sorted(names - {FOLDER})


def this_program() -> str:
    """This program as `driver` names it: its process id and its host."""
    return program_named(socket.gethostname(), os.getpid())


def program_named(host: str, pid: int | str) -> str:
    """A program of `host` as `driver` names it."""
    return f"pid {pid} on {host}"
