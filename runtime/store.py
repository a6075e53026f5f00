"""Where a process lives: the journal is the truth, everything else is derived from it.

`FolderStore` keeps a run folder:

    run.json             who the process is: workflow, source, its sha256, when it started
    plan/                the plan the run started with (plan.json, step_config.json, prompts/)
    journal.jsonl        append-only; one line per applied reply, durable before the step
                         returns; allocated ahead, so its unused tail is zero bytes
    snapshot.json        the state every 1,000 entries, replaced atomically (fast loading)
    events.jsonl         the seed's events, derived; rebuilt from the journal after a crash
    todos/<step>.json    the seed's todos.json per todo_task step, derived
    todos/.spare-<step>  made with the run folder; the step's completion fills it and
                         renames it into place instead of creating a file
    lock                 steps on one process take this file lock, one at a time
    driving              a program that drives the run holds a shared lock on it (the
                         run is `running`); `status` only tries it

A step costs one fdatasync whatever the run's length. The journal is allocated ahead
in chunks (its unused tail is zero bytes), so appending a line does not change the
file's size and syncing it flushes the line alone, not the file system's metadata:
measured here, half the cost of an append that grows the file.

**Reading writes nothing.** A store opens its files for reading; it becomes a writer at
its first step, and only then repairs what a crash left behind (a torn last journal
line, events or todos behind the journal). A run folder on a read-only mount can be
looked at. **A damaged run is refused, never restarted**: a journal that is missing,
shorter than its snapshot or its events say, or unreadable before its last line raises
`DamagedRun` naming what is wrong and what is left, and nothing is written. A torn last
line, which no caller was ever told about, stays the only damage mended silently.
**Once the journal entry is synced the step has happened**: a derived file that cannot
be written then (a full disk) is logged and repaired at the next step, and the caller
gets its next directive.

`MemoryStore` has the same interface without files, for tests, benchmarks and
embedding; `runtime.pg_store.PgStore` is the third implementation, over PostgreSQL.

A run folder does not record which reply used an attempt id, so it cannot tell a client
retrying a reply whose answer it lost from a racing reply that lost: both are refused
as stale, with the current directive. A store that records it (`MemoryStore`,
`PgStore`) answers the retry `Replayed` (docs/postgres.md, Replayed and stale).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pydantic_core

from todoflow.compiler.files import write_atomically
from todoflow.dsl.diagnostics import TodoflowError

from .entries import Entry, EntryFormatError, SubAgentDone, entry_from_json, to_json
from .events import entry_events, todos
from .learnings import LearningError, Learnings, learning_of
from .plan import RunPlan
from .state import ProcessState, from_json, initial_state, leave, settle
from .state import to_json as state_json

FLUSH_EVERY = 100  # events.jsonl is brought up to date at least this often
SNAPSHOT_EVERY = 1000  # loading replays at most this many entries
CHUNK = 1 << 20  # the journal grows a MiB at a time
READ_PIECE = 1 << 16
JOURNAL, EVENTS, SNAPSHOT, LOCK, TODOS = "journal.jsonl", "events.jsonl", "snapshot.json", "lock", "todos"
DRIVING = "driving"

log = logging.getLogger("todoflow.store")


class StoreError(TodoflowError):
    """A run folder that cannot be used, with the reason."""


class DamagedRun(StoreError):
    """A run folder whose journal does not hold what its other files say happened."""


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


class Applied(NamedTuple):
    """One journal entry with the states around it: what its events are derived from."""

    before: ProcessState
    settled: ProcessState  # the entry's own step after it
    entry: Entry

    @property
    def seq(self) -> int:
        return self.entry.seq


class Store(Protocol):
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

    def entries(self, after: int = 0) -> list[dict[str, Any]]:
        """The journal's entries after entry `after`, in order, as its lines' JSON."""
        ...

    def repair(self) -> bool:
        """Bring derived files up to the journal (a crash may have left them behind)."""
        ...

    def drive(self) -> None:
        """Say the run is being driven (until the store is closed)."""
        ...

    def driven(self) -> bool:
        """Whether a program drives the run now."""
        ...

    def close(self) -> None:
        """Release what the store holds."""
        ...


class MemoryStore:
    """A store that keeps everything in memory."""

    shared = False

    def __init__(self, process_id: str, plan: RunPlan, started_at: str) -> None:
        self.process_id, self.plan = process_id, plan
        self.state = initial_state(plan, started_at)
        self.journal: list[Entry] = []
        self.events: list[dict[str, Any]] = []
        self.started_at = started_at
        self.requests: dict[str, str] = {}  # attempt id -> the digest of the reply that used it
        self._lock = threading.Lock()
        self._driven = False

    @contextlib.contextmanager
    def locked(self, cached: bool = False) -> Iterator[ProcessState]:
        with self._lock:
            yield self.state

    def commit(self, steps: Sequence[Applied], after: ProcessState, request: Request | None = None) -> None:
        for before, settled, entry in steps:
            self.journal.append(entry)
            self.events += entry_events(self.plan, before, settled, entry, self.process_id)
        if request is not None:
            self.requests[request.attempt] = request.digest
        self.state = after

    def replayed(self, request: Request) -> bool:
        return self.requests.get(request.attempt) == request.digest

    def behind(self, state: ProcessState) -> bool:
        return False

    def entries(self, after: int = 0) -> list[dict[str, Any]]:
        return [to_json(entry) for entry in self.journal[after:]]

    def repair(self) -> bool:
        return False  # nothing is derived from the journal but in memory

    def drive(self) -> None:
        self._driven = True

    def driven(self) -> bool:
        return self._driven

    def close(self) -> None:
        """Nothing to release."""


class _Hold:
    """`FolderStore.locked()`: the thread lock, then the file lock, for one step. A class
    rather than a generator-based context manager: it is entered at every step."""

    __slots__ = ("store",)

    def __init__(self, store: FolderStore) -> None:
        self.store = store

    def __enter__(self) -> ProcessState:
        return self.store._acquire()

    def __exit__(self, *exc: object) -> None:
        self.store._release()


def prepare_folder(folder: Path, plan: RunPlan) -> None:
    """Make a new run folder's store files: the journal's first chunk (allocated, so a
    step does not grow the file), the lock, and per todo_task step a spare file that the
    step's completion fills and renames into place. Creating or growing a file costs more
    than a step on some file systems; done here, no step pays for it."""
    journal = os.open(folder / JOURNAL, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        os.posix_fallocate(journal, 0, CHUNK)
    finally:
        os.close(journal)
    os.close(os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o666))
    os.close(os.open(folder / DRIVING, os.O_RDWR | os.O_CREAT, 0o666))
    spares = folder / TODOS
    spares.mkdir()
    for step in plan.steps:
        if step.kind == "todo_task":
            os.close(os.open(_spare(spares, step.id), os.O_WRONLY | os.O_CREAT, 0o666))


class FolderStore:
    shared = False  # the file lock serializes every program's steps: the state is always current

    def __init__(
        self,
        folder: Path,
        plan: RunPlan,
        process_id: str,
        started_at: str,
        learnings: Learnings | None = None,
        definition_sha256: str | None = None,
    ) -> None:
        self.folder, self.plan, self.process_id, self.started_at = folder, plan, process_id, started_at
        self.learnings, self.definition_sha256 = learnings, definition_sha256
        self._thread_lock = threading.Lock()
        self._state: ProcessState | None = None
        self._offset = 0  # bytes of the journal folded into _state
        self._torn = 0  # bytes of a torn last line after _offset: the next write erases them
        self._allocated = 0  # the journal's size when last seen (it only grows)
        self._writer = False  # opened for writing: by the first step, never by a reader
        self._repaired = False  # derived files checked against the journal since becoming a writer
        self._pending: list[Applied] = []  # entries since the last flush (and the one before)
        self._learned: set[int] = set()  # entries since the last flush whose learnings this store wrote
        self._last_applied: Applied | None = None  # the journal's last entry, with its states
        self._todos_behind = False  # the current step's todos lag behind the journal
        self._events = -1  # events.jsonl, opened by the first flush
        self._events_size = 0
        self._events_seq: int | None = None  # the entry events.jsonl ends with, once read
        self._journal = _open_existing(folder / JOURNAL, os.O_RDONLY)
        self._lockfile = _open_existing(folder / LOCK, os.O_RDONLY)
        self._driving = -1
        self._hold = _Hold(self)

    def close(self) -> None:
        """Bring what is derived up to date (if this store wrote) and release the files."""
        if self._writer:
            with self.locked() as state:
                self._derive_quietly(lambda: self._catch_up(state))
        for handle in (self._journal, self._events, self._lockfile, self._driving):
            if handle >= 0:
                os.close(handle)
        self._journal = self._events = self._lockfile = self._driving = -1

    def drive(self) -> None:
        """Say the run is being driven, until the store is closed (a shared lock: any number
        of programs may drive one run; `status` sees it as `running`)."""
        if self._driving < 0:
            self._driving = _open_existing(self.folder / DRIVING, os.O_RDONLY)
            if self._driving >= 0:
                fcntl.flock(self._driving, fcntl.LOCK_SH)

    def driven(self) -> bool:
        """Whether a program drives the run now (this store or another)."""
        if self._driving >= 0:
            return True
        handle = _open_existing(self.folder / DRIVING, os.O_RDONLY)
        if handle < 0:
            return False
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(handle)  # releases the probe's lock
        return False

    # -- loading -------------------------------------------------------------------

    def locked(self, cached: bool = False) -> contextlib.AbstractContextManager[ProcessState]:
        return self._hold

    def _acquire(self) -> ProcessState:
        self._thread_lock.acquire()
        try:
            if self._lockfile >= 0:
                fcntl.flock(self._lockfile, fcntl.LOCK_EX)
            return self._refresh()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        try:
            if self._lockfile >= 0:
                fcntl.flock(self._lockfile, fcntl.LOCK_UN)  # harmless if it was not taken
        finally:
            self._thread_lock.release()

    def state(self) -> ProcessState:
        with self.locked() as state:
            return state

    def _refresh(self) -> ProcessState:
        """The current state: the cached one, plus whatever others appended since."""
        if (
            self._state is not None
            and self._journal >= 0
            and os.pread(self._journal, 1, self._offset + self._torn) in (b"", b"\0")
        ):
            return self._state
        if self._state is None:
            self._state, self._offset = self._load()
        else:
            self._state, self._offset = self._replay(self._state, self._offset)
        return self._state

    def _load(self) -> tuple[ProcessState, int]:
        """The state the folder holds, or `DamagedRun` when its files disagree."""
        if self._journal < 0:
            self._journal = _open_existing(self.folder / JOURNAL, os.O_RDONLY)
        snapshot = self._read_snapshot()
        if self._journal < 0:
            if snapshot is not None or _last_seq(self.folder / EVENTS) != 0 or self._has_todos():
                raise self._damaged(f"{JOURNAL} is missing", 0)
            return initial_state(self.plan, self.started_at), 0  # made by an older version at its first step
        state, offset = snapshot or (initial_state(self.plan, self.started_at), 0)
        if offset and os.pread(self._journal, 1, offset - 1) != b"\n":  # emptied, cut or zeroed
            raise self._damaged(f"{JOURNAL} ends before the entry its snapshot was taken at", 0)
        state, offset = self._replay(state, offset)
        recorded = _last_seq(self.folder / EVENTS)
        if recorded > state.seq:
            raise self._damaged(f"{EVENTS} records entries up to {recorded}", state.seq)
        return state, offset

    def _read_snapshot(self) -> tuple[ProcessState, int] | None:
        try:
            data = json.loads((self.folder / SNAPSHOT).read_text(encoding="utf-8"))
            return from_json(data["state"]), int(data["offset"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged snapshot: replay the journal from the start

    def _replay(self, state: ProcessState, offset: int) -> tuple[ProcessState, int]:
        data = self._written_from(offset)
        complete = data.rfind(b"\n") + 1
        self._torn = len(data) - complete  # a torn last line: the step never returned
        for number, line in enumerate(data[:complete].splitlines(), start=1):
            entry = self._entry(line, state)
            if entry is None:
                raise self._damaged(
                    f"line {number} of {JOURNAL} after entry {state.seq} is not an entry", state.seq
                )
            settled = settle(self.plan, state, entry)
            self._last_applied = Applied(state, settled, entry)
            if self._writer:  # another program's step: its events are ours to flush too
                self._remember(self._last_applied)
            state = leave(self.plan, settled, entry.at)
        return state, offset + complete

    def _entry(self, line: bytes, state: ProcessState) -> Entry | None:
        try:
            entry = entry_from_json(json.loads(line))
        except (ValueError, EntryFormatError):
            return None
        if entry.seq != state.seq + 1:
            raise self._damaged(f"{JOURNAL}: entry {entry.seq} follows entry {state.seq}", state.seq)
        return entry

    def _written_from(self, offset: int) -> bytes:
        """The journal's bytes from `offset` to its zero tail, read a piece at a time: a
        fresh run's journal is a MiB of zeros, not worth reading to open it."""
        pieces = []
        while piece := os.pread(self._journal, READ_PIECE, offset):
            written = _written(piece)
            pieces.append(written)
            if len(written) < len(piece):
                break
            offset += len(piece)
        return b"".join(pieces)

    def _has_todos(self) -> bool:
        folder = self.folder / TODOS
        return folder.is_dir() and any(p.suffix == ".json" for p in folder.iterdir())

    def _damaged(self, problem: str, entries: int) -> DamagedRun:
        left = f"the journal holds {entries} entr{'y' if entries == 1 else 'ies'}"
        return DamagedRun(
            f"run `{self.process_id}` is damaged: {problem}; {left}. Nothing was changed: the run "
            "cannot be stepped until its journal is restored (docs/runtime.md, Damaged runs)"
        )

    def entries(self, after: int = 0) -> list[dict[str, Any]]:
        return read_journal(self.folder)[after:]  # entries are numbered 1, 2, ... in order

    # -- writing -------------------------------------------------------------------

    def replayed(self, request: Request) -> bool:
        return False  # the journal does not say which reply used an attempt id (module docstring)

    def behind(self, state: ProcessState) -> bool:
        return False  # read under the file lock: current

    def commit(self, steps: Sequence[Applied], after: ProcessState, request: Request | None = None) -> None:
        """Append the entries in one write and sync them: from then on the step has
        happened. The derived files follow, and a failure of theirs is logged and repaired
        later, never raised."""
        self._become_writer(steps[0].before)
        lines = [_line(to_json(applied.entry)) for applied in steps]
        line = b"".join(lines)
        end = self._offset + len(line)
        if end > self._allocated:  # another process may have allocated since we last looked
            self._allocated = os.fstat(self._journal).st_size
        grow = end > self._allocated
        if grow:  # allocate the next chunk; the file's size changes, so this step syncs it all
            _allocate(self._journal, self._offset, len(line) + CHUNK)
            self._allocated = self._offset + len(line) + CHUNK
        start = self._offset
        try:
            os.pwrite(self._journal, line + b"\0" * max(0, self._torn - len(line)), start)
            (os.fsync if grow else os.fdatasync)(self._journal)  # the step is confirmed once this returns
        except OSError as error:  # not confirmed: take the line back, so no reader ever sees it
            with contextlib.suppress(OSError):
                os.pwrite(self._journal, b"\0" * len(line), start)
            raise StoreError(
                f"cannot write the journal ({error.strerror or error}): the step was not saved"
            ) from None
        self._offset, self._torn, self._state = end, 0, after
        for applied in steps:
            self._remember(applied)
        self._last_applied = steps[-1]
        self._todos_behind = True
        last_start = end - len(lines[-1])
        self._derive_quietly(lambda: self._after_commit(steps, after, last_start))

    def _after_commit(self, steps: Sequence[Applied], after: ProcessState, start: int) -> None:
        self._record_learnings(steps)
        self._learned.update(applied.seq for applied in steps)
        for applied in steps:
            if (
                applied.settled.step_complete
            ):  # the step's todos first: events at the journal's end vouch for them
                self._write_todos(applied.settled)
        first = steps[0].seq
        complete = any(applied.settled.step_complete for applied in steps)
        if complete or any(seq % FLUSH_EVERY == 0 for seq in range(first, after.seq + 1)):
            self._flush_events()
        if any(seq % SNAPSHOT_EVERY == 0 for seq in range(first, after.seq + 1)):
            self._write_snapshot(steps[-1], start)

    def _derive_quietly(self, work: Any) -> None:
        """Write derived files; on failure (a full disk, say) log it and repair them later."""
        try:
            work()
        except OSError as error:
            self._repaired = False
            log.warning(
                "run %s: derived files not written (%s); they are rebuilt from the journal at the next step",
                self.process_id,
                error.strerror or error,
            )

    def _become_writer(self, state: ProcessState) -> None:
        """Before this store's first write: open the journal for writing, then repair what
        a crash left behind, before anything new is derived."""
        self._open_for_writing()
        if not self._repaired:
            self._derive_quietly(lambda: self._repair_locked(state))

    def _open_for_writing(self) -> None:
        if self._writer:
            return
        try:
            handle = os.open(self.folder / JOURNAL, os.O_RDWR | os.O_CREAT, 0o666)
            if self._lockfile < 0:  # a folder made by an older version: the lock is made now
                self._lockfile = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
                fcntl.flock(self._lockfile, fcntl.LOCK_EX)
        except OSError as error:
            raise StoreError(f"cannot write to run folder {self.folder}: {error.strerror or error}") from None
        if self._journal >= 0:
            os.close(self._journal)
        self._journal, self._writer = handle, True
        self._allocated = os.fstat(handle).st_size

    def _remember(self, applied: Applied) -> None:
        self._pending.append(applied)
        if len(self._pending) > 4 * FLUSH_EVERY:  # a writer that only watches others step
            self._pending, self._repaired = [], False  # the next step verifies the file instead

    def _flush_events(self) -> None:
        """Append the events of the entries since the last flush, in one batch rather than
        a little at every step. Written after the todos of the steps they complete, events
        that reach the journal's end say those todos are written too. The entries include
        those another program appended to the journal (each store replays them), so two
        programs stepping one run never leave each other's events out; the file must end
        with exactly the events of the entry it names last, else it is rebuilt."""
        if not self._pending:
            return
        last = self._events_last_seq()
        known = {applied.seq: applied for applied in self._pending}
        fresh = [applied for applied in self._pending if applied.seq > last]
        ends_cleanly = last == 0 or (
            last in known
            and _ends_with(self.folder / EVENTS, _event_lines(self.plan, self.process_id, [known[last]]))
        )
        if last < 0 or not ends_cleanly or (fresh and fresh[0].seq != last + 1):
            self._rebuild_events()
            return
        # another program's validated delegations: before their events
        self._record_learnings(applied for applied in fresh if applied.seq not in self._learned)
        if fresh:
            self._append_events(_event_lines(self.plan, self.process_id, fresh))
            self._events_seq = fresh[-1].seq
        # the next flush checks the file still ends with its events
        self._pending, self._learned = self._pending[-1:], set()

    def _events_last_seq(self) -> int:
        """The journal entry whose events end events.jsonl (-1: unreadable): as this store
        left the file, or read from it if another process appended to it or replaced it."""
        path = self.folder / EVENTS
        if self._events < 0:
            self._open_events()
        ours = os.fstat(self._events)
        try:
            replaced = os.stat(path).st_ino != ours.st_ino
        except FileNotFoundError:
            replaced = True
        if replaced:
            os.close(self._events)
            self._open_events()
        elif ours.st_size != self._events_size:
            self._events_size, self._events_seq = ours.st_size, None
        if self._events_seq is None:
            self._events_seq = _last_seq(path)
        return self._events_seq

    def _open_events(self) -> None:
        """Open events.jsonl to append to it, noting its size as this store leaves it (the
        entry its last events come from is read when a flush first needs it)."""
        self._events = os.open(self.folder / EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self._events_size = os.fstat(self._events).st_size
        self._events_seq = None

    def _append_events(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._events, view) :]
        self._events_size = os.fstat(self._events).st_size

    def _write_todos(self, state: ProcessState, only_if_changed: bool = False) -> None:
        """Refresh todos/<step>.json of the state's step (a todo_task step with a checklist),
        under the process lock. A completed step's final todos fill the step's spare file."""
        if state.step_id is None or not state.tasks:
            return
        step = self.plan.step(state.step_id)
        if step.kind != "todo_task":
            return
        folder = self.folder / TODOS
        path = folder / f"{step.id}.json"
        text = todos(step, state)
        if only_if_changed and _reads(path) == text:
            return
        spare = _spare(folder, step.id) if state.step_complete else None
        write_atomically(path, text, spare)

    def _record_learnings(self, applied: Iterable[Applied]) -> None:
        """The learning of each validated delegation to a route, written unless it is
        there already (learnings are derived from the journal: exactly once)."""
        if self.learnings is None:
            return
        for before, _, entry in applied:
            if not isinstance(entry, SubAgentDone) or not entry.passed:
                continue
            learning = learning_of(self.plan, self.process_id, self.definition_sha256, before, entry)
            if learning is None:
                continue
            try:
                self.learnings.add(learning)
            except LearningError as error:
                log.warning("run %s: %s", self.process_id, error)

    def _write_snapshot(self, applied: Applied, start: int) -> None:
        """The state before the last entry, and where that entry starts: loading then
        replays at least that one entry, so a writer always knows the entry whose events
        end events.jsonl."""
        snapshot = {"offset": start, "state": state_json(applied.before)}
        write_atomically(self.folder / SNAPSHOT, json.dumps(snapshot, ensure_ascii=False) + "\n")

    def _catch_up(self, state: ProcessState) -> None:
        """What `close` owes: the events of the entries since the last flush, and the
        current step's todos if a step since its last refresh changed them."""
        if not self._repaired:
            self._repair_locked(state)
        self._flush_events()
        if self._todos_behind:
            self._write_todos(state, only_if_changed=True)
            self._todos_behind = False

    # -- derived files after a crash ---------------------------------------------------

    def repair(self) -> bool:
        """Rebuild events.jsonl and todos/ from the journal if a crash left them behind it;
        True when something was rebuilt. Writes nothing when they are current."""
        with self.locked() as state:
            self._open_for_writing()
            return self._repair_locked(state)

    def _repair_locked(self, state: ProcessState) -> bool:
        """Under the lock, as a writer: leftovers of interrupted replaces removed, the torn
        last line erased, events.jsonl verified entry by entry against the journal and
        rebuilt if any entry's events are missing, the current step's todos refreshed."""
        for leftover in [*self.folder.glob(".*.*"), *self.folder.glob(f"{TODOS}/.*.*")]:
            if not leftover.name.startswith(".spare-"):
                leftover.unlink(missing_ok=True)
        if self._torn:
            os.pwrite(self._journal, b"\0" * self._torn, self._offset)
            os.fsync(self._journal)
            self._torn = 0
        rebuilt = not self._events_match(state)
        if rebuilt:
            self._rebuild_events()
        else:
            self._pending = [self._last_applied] if self._last_applied is not None else []
        self._write_todos(state, only_if_changed=True)
        self._repaired, self._todos_behind = True, False
        return rebuilt

    def _events_match(self, state: ProcessState) -> bool:
        """Whether events.jsonl holds the events of every journal entry, 1 to the last, in
        order, and ends with exactly the last entry's events (a crash can cut a batch at
        the end of a line inside one entry's events)."""
        path = self.folder / EVENTS
        data = _reads(path)
        if state.seq == 0:
            return not data
        if data is None or self._last_applied is None or self._last_applied.seq != state.seq:
            return False
        seqs = [int(seq) for seq in _SEQ.findall(data)]
        if len(seqs) != data.count("\n") or not seqs or seqs[0] != 1:
            return False
        if any(b - a not in (0, 1) for a, b in itertools.pairwise(seqs)) or seqs[-1] != state.seq:
            return False
        return data.encode().endswith(_event_lines(self.plan, self.process_id, [self._last_applied]))

    def _rebuild_events(self) -> None:
        """events.jsonl, and the todos of every completed step, made again from the journal."""
        replayed: list[Applied] = []
        current = initial_state(self.plan, self.started_at)
        for data in self.entries():
            entry = entry_from_json(data)
            settled = settle(self.plan, current, entry)
            replayed.append(Applied(current, settled, entry))
            if settled.step_complete:
                self._write_todos(settled, only_if_changed=True)
            current = leave(self.plan, settled, entry.at)
        self._record_learnings(replayed)
        write_atomically(self.folder / EVENTS, _event_lines(self.plan, self.process_id, replayed).decode())
        if self._events >= 0:
            os.close(self._events)
        self._open_events()
        self._pending = replayed[-1:]


# every line of events.jsonl starts `{"event":"…","process_id":"…","seq":N,` (its field order)
_SEQ = re.compile(r'^\{"event":"[^"\n]*","process_id":"(?:[^"\\\n]|\\.)*","seq":(\d+),', re.M)


def _event_lines(plan: RunPlan, process_id: str, entries: Iterable[Applied]) -> bytes:
    """events.jsonl's lines for journal entries, each with the states before and after it."""
    return b"".join(
        _line(event)
        for before, settled, entry in entries
        for event in entry_events(plan, before, settled, entry, process_id)
    )


def _open_existing(path: Path, flags: int) -> int:
    """A handle on `path`, or -1 if it does not exist (a reader creates nothing)."""
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        return -1
    except OSError as error:
        raise StoreError(f"cannot open {path}: {error.strerror or error}") from None


def _allocate(handle: int, offset: int, length: int) -> None:
    try:
        os.posix_fallocate(handle, offset, length)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreError(
                f"no space left for the journal ({error.strerror}): the step was not saved"
            ) from None
        raise


def _spare(folder: Path, step_id: str) -> Path:
    return folder / f".spare-{step_id}"


def _reads(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def read_journal(folder: Path) -> list[dict[str, Any]]:
    """The complete entries of a run folder's journal, in order, as their lines' JSON."""
    try:
        with open(folder / JOURNAL, "rb") as handle:
            data = _written(handle.read())
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def _written(data: bytes) -> bytes:
    """The journal's bytes up to its allocated but unwritten (zero) tail."""
    end = data.find(b"\0")
    return data if end < 0 else data[:end]


def _line(record: Mapping[str, Any]) -> bytes:
    """One compact JSON line, UTF-8 as it is: what `json.dumps(record, ensure_ascii=False,
    separators=(",", ":"))` writes, at a quarter of its cost (a run writes ~3 per step)."""
    return pydantic_core.to_json(record) + b"\n"


def _ends_with(path: Path, data: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < len(data):
                return False
            handle.seek(size - len(data))
            return handle.read() == data
    except OSError:
        return False


def _last_seq(path: Path) -> int:
    """The journal sequence number the last complete event line was derived from (0: no
    events; -1: the file does not end with a complete event line)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except FileNotFoundError:
        return 0
    except OSError:
        return -1
    if not tail:
        return 0
    if not tail.endswith(b"\n"):
        return -1
    try:
        return int(json.loads(tail.splitlines()[-1])["seq"])
    except (ValueError, KeyError, TypeError):
        return -1
