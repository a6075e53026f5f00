"""Where a process lives: the journal is the truth, everything else is derived from it.

`FolderStore` keeps a run folder:

    run.json             who the process is: workflow, source, its sha256, when it started
    plan/                the plan the run started with (plan.json, step_config.json, prompts/)
    journal.jsonl        append-only; one line per applied reply, durable before the step returns
    snapshot.json        the state every 1,000 entries, replaced atomically (fast loading)
    events.jsonl         the seed's events, derived; rebuilt from the journal after a crash
    todos/<step>.json    the seed's todos.json per todo_task step, derived
    todos/.spare-<step>  made when the run is first opened; the step's completion fills it
                         and renames it into place instead of creating a file
    lock                 steps on one process take this file lock, one at a time

A step costs one fdatasync whatever the run's length. The journal is allocated ahead
in chunks (its unused tail is zero bytes), so appending a line does not change the
file's size and syncing it flushes the line alone, not the file system's metadata:
measured here, half the cost of an append that grows the file. A crash can leave at
most a torn last line, which no one was ever told about: loading erases it. `MemoryStore`
has the same interface without files, for tests, benchmarks and embedding; a shared
database would be a third implementation of `Store`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pydantic_core

from todoflow.compiler.files import sync_folder, write_atomically
from todoflow.dsl.diagnostics import TodoflowError

from .events import entry_events, todos
from .plan import RunPlan
from .state import ProcessState, from_json, initial_state, leave, settle, to_json

FLUSH_EVERY = 100  # events.jsonl is brought up to date at least this often
SNAPSHOT_EVERY = 1000  # loading replays at most this many entries
CHUNK = 1 << 20  # the journal grows a MiB at a time
READ_PIECE = 1 << 16
Entry = Mapping[str, Any]
Applied = tuple[
    ProcessState, ProcessState, Entry
]  # the state before an entry, the entry's own step settled, the entry


class StoreError(TodoflowError):
    """A run folder that cannot be used, with the reason."""


class Store(Protocol):
    process_id: str
    plan: RunPlan

    def locked(self) -> contextlib.AbstractContextManager[ProcessState]:
        """Hold the process for one step; yields its current state."""
        ...

    def commit(self, entry: Entry, before: ProcessState, settled: ProcessState, after: ProcessState) -> None:
        """Make one entry durable (called inside `locked`)."""
        ...

    def entries(self) -> list[dict[str, Any]]:
        """The journal, in order."""
        ...


class MemoryStore:
    """A store that keeps everything in memory."""

    def __init__(self, process_id: str, plan: RunPlan, started_at: str) -> None:
        self.process_id, self.plan = process_id, plan
        self.state = initial_state(plan, started_at)
        self.journal: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def locked(self) -> Iterator[ProcessState]:
        with self._lock:
            yield self.state

    def commit(self, entry: Entry, before: ProcessState, settled: ProcessState, after: ProcessState) -> None:
        self.journal.append(dict(entry))
        self.events += entry_events(self.plan, before, settled, entry, self.process_id)
        self.state = after

    def entries(self) -> list[dict[str, Any]]:
        return list(self.journal)


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


class FolderStore:
    def __init__(self, folder: Path, plan: RunPlan, meta: Mapping[str, Any]) -> None:
        self.folder, self.plan, self.meta = folder, plan, dict(meta)
        self.process_id: str = meta["process_id"]
        self._thread_lock = threading.Lock()
        self._state: ProcessState | None = None
        self._offset = 0  # bytes of the journal folded into _state
        self._allocated = 0  # the journal's size when last seen (it only grows)
        self._pending: list[Applied] = []  # entries whose events wait
        self._last_applied: Applied | None = None  # the journal's last entry, with its states
        self._journal = os.open(folder / "journal.jsonl", os.O_RDWR | os.O_CREAT, 0o644)
        self._events, self._events_size = -1, 0  # set by _open_events
        self._events_seq: int | None = None  # the entry events.jsonl ends with, once read
        self._open_events()
        self._lockfile = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._hold = _Hold(self)
        self._prepare()

    def _prepare(self) -> None:
        """A new run folder, opened for the first time, gets ready for its steps: the
        journal's first chunk allocated and made durable with the folder's entry for it,
        and per todo_task step a spare file that the step's completion fills and renames
        into place. Creating a file or growing one costs more than a step on some file
        systems; done here, no step pays for it."""
        fcntl.flock(self._lockfile, fcntl.LOCK_EX)
        try:
            if os.fstat(self._journal).st_size > 0:
                return  # prepared already, by this process or another one
            os.posix_fallocate(self._journal, 0, CHUNK)
            os.fsync(self._journal)
            sync_folder(self.folder)
            self._allocated = CHUNK
            folder = self.folder / "todos"
            folder.mkdir(exist_ok=True)
            for step in self.plan.steps:
                if step.kind == "todo_task":
                    os.close(os.open(_spare(folder, step.id), os.O_WRONLY | os.O_CREAT, 0o666))
        finally:
            fcntl.flock(self._lockfile, fcntl.LOCK_UN)

    def close(self) -> None:
        """Flush what is derived and release the files; the journal is already durable."""
        with self.locked() as state:
            self._write_todos(state)
            self._flush_events()
        for handle in (self._journal, self._events, self._lockfile):
            os.close(handle)

    # -- loading -------------------------------------------------------------------

    def locked(self) -> contextlib.AbstractContextManager[ProcessState]:
        return self._hold

    def _acquire(self) -> ProcessState:
        self._thread_lock.acquire()
        try:
            fcntl.flock(self._lockfile, fcntl.LOCK_EX)
            return self._refresh()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        try:
            fcntl.flock(self._lockfile, fcntl.LOCK_UN)  # harmless if it was not taken
        finally:
            self._thread_lock.release()

    def state(self) -> ProcessState:
        with self.locked() as state:
            return state

    def _refresh(self) -> ProcessState:
        """The current state: the cached one, plus whatever others appended since."""
        if self._state is not None and os.pread(self._journal, 1, self._offset) in (b"", b"\0"):
            return self._state
        if self._state is None:
            self._state, self._offset = self._from_snapshot()
        self._state, self._offset = self._replay(self._state, self._offset)
        return self._state

    def _from_snapshot(self) -> tuple[ProcessState, int]:
        start = initial_state(self.plan, self.meta["started_at"])
        try:
            data = json.loads((self.folder / "snapshot.json").read_text(encoding="utf-8"))
            return from_json(data["state"]), int(data["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            return start, 0  # no snapshot, or a damaged one: replay the journal from the start

    def _replay(self, state: ProcessState, offset: int) -> tuple[ProcessState, int]:
        data = self._written_from(offset)
        complete = data.rfind(b"\n") + 1
        if complete < len(data):  # a torn last line: the step never returned, so erase it
            os.pwrite(self._journal, b"\0" * (len(data) - complete), offset + complete)
            os.fsync(self._journal)
        for line in data[:complete].splitlines():
            entry = json.loads(line)
            if entry["seq"] != state.seq + 1:
                raise StoreError(
                    f"journal of {self.process_id}: entry {entry['seq']} follows entry {state.seq}"
                )
            settled = settle(self.plan, state, entry)
            self._last_applied = (state, settled, entry)
            state = leave(self.plan, settled, entry["at"])
        return state, offset + complete

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

    def entries(self) -> list[dict[str, Any]]:
        return read_journal(self.folder)

    # -- writing -------------------------------------------------------------------

    def commit(self, entry: Entry, before: ProcessState, settled: ProcessState, after: ProcessState) -> None:
        line = _line(entry)
        end = self._offset + len(line)
        if end > self._allocated:  # another process may have allocated since we last looked
            self._allocated = os.fstat(self._journal).st_size
        grow = end > self._allocated
        if grow:  # allocate the next chunk; the file's size changes, so this step syncs it all
            os.posix_fallocate(self._journal, self._offset, len(line) + CHUNK)
            self._allocated = self._offset + len(line) + CHUNK
        os.pwrite(self._journal, line, self._offset)
        (os.fsync if grow else os.fdatasync)(self._journal)  # the step is confirmed once this returns
        self._offset = end
        self._state = after
        self._last_applied = (before, settled, entry)
        self._pending.append(self._last_applied)
        if settled.step_complete:  # the step's todos first: events at the journal's end vouch for them
            self._write_todos(settled)
        if settled.step_complete or after.seq % FLUSH_EVERY == 0:
            self._flush_events()
        if after.seq % SNAPSHOT_EVERY == 0:
            self._write_snapshot(after)

    def _flush_events(self) -> None:
        """Derive and append the events of the entries since the last flush, in one batch
        rather than a little at every step. Written after the todos of the steps they
        complete, events that reach the journal's end say those todos are written too (the
        current step's own todos are refreshed at its completion, on close and on repair).
        Between flushes only the journal is written, so each step's sync has one small
        file to make durable. Another process stepping the same run appends its own
        events; whatever it wrote is skipped, and a gap rebuilds the file from the journal."""
        if not self._pending:
            return
        last = self._events_last_seq()
        pending = [item for item in self._pending if item[2]["seq"] > last]
        self._pending = []
        if not pending:
            return
        if last < 0 or pending[0][2]["seq"] != last + 1:
            self._rebuild_events()
            return
        self._append_events(_event_lines(self.plan, self.process_id, pending))
        self._events_seq = pending[-1][2]["seq"]

    def _events_last_seq(self) -> int:
        """The journal entry whose events end events.jsonl (-1: unreadable): as this store
        left the file, or read from it if another process appended to it or replaced it."""
        path = self.folder / "events.jsonl"
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
        self._events = os.open(self.folder / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._events_size = os.fstat(self._events).st_size
        self._events_seq = None

    def _append_events(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._events, view) :]
        self._events_size = os.fstat(self._events).st_size

    def _write_todos(self, state: ProcessState) -> None:
        """Refresh todos/<step>.json of the state's step (a todo_task step with a checklist),
        under the process lock. A completed step's final todos fill the step's spare file."""
        if state.step_id is None or not state.tasks:
            return
        step = self.plan.step(state.step_id)
        if step.kind == "todo_task":
            folder = self.folder / "todos"
            spare = _spare(folder, step.id) if state.step_complete else None
            write_atomically(folder / f"{step.id}.json", todos(step, state), spare)

    def _write_snapshot(self, state: ProcessState) -> None:
        snapshot = {"offset": self._offset, "state": to_json(state)}
        write_atomically(self.folder / "snapshot.json", json.dumps(snapshot, ensure_ascii=False) + "\n")

    # -- derived files after a crash ---------------------------------------------------

    def repair(self) -> bool:
        """Rebuild events.jsonl and todos/ from the journal if a crash left them behind it."""
        with self.locked() as state:  # every writer of the folder holds it: what is left is debris
            for leftover in [*self.folder.glob(".*.*"), *self.folder.glob("todos/.*.*")]:
                if not leftover.name.startswith(".spare-"):
                    leftover.unlink(missing_ok=True)  # the temporary file of an interrupted replace
            if self._events_complete(state):
                self._write_todos(state)  # the current step's, possibly behind since its last refresh
                return False
            self._rebuild_events()
            self._write_todos(state)
            return True

    def _events_complete(self, state: ProcessState) -> bool:
        """Whether events.jsonl ends with exactly the events of the journal's last entry: a
        crash can cut a batch at the end of a line inside one entry's events, which the
        last line's entry alone would not show."""
        path = self.folder / "events.jsonl"
        if state.seq == 0:
            return not path.exists() or path.stat().st_size == 0
        if self._last_applied is None or self._last_applied[2]["seq"] != state.seq:
            return False  # loaded from a snapshot taken at the last entry: rebuild, not guess
        return _ends_with(path, _event_lines(self.plan, self.process_id, [self._last_applied]))

    def _rebuild_events(self) -> None:
        """events.jsonl, and the todos of every completed step, made again from the journal."""
        replayed: list[Applied] = []
        current = initial_state(self.plan, self.meta["started_at"])
        for entry in self.entries():
            settled = settle(self.plan, current, entry)
            replayed.append((current, settled, entry))
            if settled.step_complete:
                self._write_todos(settled)
            current = leave(self.plan, settled, entry["at"])
        lines = _event_lines(self.plan, self.process_id, replayed)
        write_atomically(self.folder / "events.jsonl", lines.decode())
        os.close(self._events)
        self._open_events()
        self._pending = []


def _event_lines(plan: RunPlan, process_id: str, entries: list[Applied]) -> bytes:
    """events.jsonl's lines for journal entries, each with the states before and after it."""
    return b"".join(
        _line(event)
        for before, settled, entry in entries
        for event in entry_events(plan, before, settled, entry, process_id)
    )


def _spare(folder: Path, step_id: str) -> Path:
    return folder / f".spare-{step_id}"


def read_journal(folder: Path) -> list[dict[str, Any]]:
    """The complete entries of a run folder's journal, in order."""
    with open(folder / "journal.jsonl", "rb") as handle:
        data = _written(handle.read())
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
    """The journal sequence number the last complete event line was derived from."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except OSError:
        return -1
    if not tail:
        return 0
    if not tail.endswith(b"\n"):
        return -1
    try:
        return int(json.loads(tail.splitlines()[-1])["seq"])
    except (ValueError, KeyError):
        return -1
