"""Where a process lives: the journal is the truth, everything else is derived from it.

`FolderStore` keeps a run folder:

    run.json             who the process is: workflow, source, its sha256, when it started
    plan/                the plan the run started with (plan.json, step_config.json, prompts/)
    journal.jsonl        append-only; one line per applied reply, durable before the step
                         returns; allocated ahead, so its unused tail is zero bytes
    snapshot.json        the state once a snapshot's worth of journal is written since the
                         last (fast loading); removed, then the new one renamed in its place
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

`FolderRuns` is the location (a folder of run folders, the default), with its MCP starts
in `.starts/` and `FolderLearnings` (`learnings/<sub-step-id>/learnings.jsonl`).

A run folder does not record which reply used an attempt id, so it cannot tell a client
retrying a reply whose answer it lost from a racing reply that lost: both are refused
as stale, with the current directive. A store that records it (`MemoryStore`,
`PgStore`) answers the retry `Replayed` (docs/postgres.md, Replayed and stale).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import ValidationError

from todoflow.compiler.files import sync_tree, write_atomically

from ..entries import Entry, json_line, to_json
from ..events import entry_events, todos
from ..learnings import LEARNINGS_FILE, PLAIN, Learning, LearningError, learned
from ..plan import RunPlan, Task, kept_plan, load_plan, run_plan
from ..state import Applied, ProcessState, from_json, initial_state, replay, replayed
from ..state import to_json as state_json
from .base import (
    FOLDER,
    READY,
    DamagedRun,
    OpenRun,
    Request,
    RunMeta,
    RunRecord,
    StartRecord,
    StoreError,
    in_order,
    ready_text,
    register,
    snapshot_due,
)

FLUSH_EVERY = 100  # events.jsonl is brought up to date at least this often
CHUNK = 1 << 20  # the journal grows a MiB at a time
READ_PIECE = 1 << 16
JOURNAL, EVENTS, SNAPSHOT, LOCK, TODOS = "journal.jsonl", "events.jsonl", "snapshot.json", "lock", "todos"
DRIVING = "driving"
FOLLOW_POLL = 0.2  # seconds between looks at a run folder's journal while following it

log = logging.getLogger("todoflow.store")


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
        learnings: FolderLearnings | None = None,
        definition_sha256: str | None = None,
    ) -> None:
        self.folder, self.plan, self.process_id, self.started_at = folder, plan, process_id, started_at
        self.learnings, self.definition_sha256 = learnings, definition_sha256
        self._thread_lock = threading.Lock()
        self._state: ProcessState | None = None
        self._offset = 0  # bytes of the journal folded into _state
        self._torn = 0  # bytes of a torn last line after _offset: the next write erases them
        self._allocated = 0  # the journal's size when last seen (it only grows)
        self._snapshot = (0, 0)  # the last snapshot known: where its entry starts, its size in bytes
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
        self._hold = _Hold(self)

    def close(self) -> None:
        """Bring what is derived up to date (if this store wrote) and release the files."""
        if self._writer:
            with self.locked() as state:
                self._derive_quietly(lambda: self._catch_up(state))
        for handle in (self._journal, self._events, self._lockfile):
            if handle >= 0:
                os.close(handle)
        self._journal = self._events = self._lockfile = -1

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
        if self._state is None or self._journal < 0:  # first look, or looked at again after `close`
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
            text = (self.folder / SNAPSHOT).read_bytes()
            data = pydantic_core.from_json(text)
            state, offset = from_json(data["state"], self.plan), int(data["offset"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged snapshot: replay the journal from the start
        self._snapshot = (offset, len(text))
        return state, offset

    def _replay(self, state: ProcessState, offset: int) -> tuple[ProcessState, int]:
        data = self._written_from(offset)
        complete = data.rfind(b"\n") + 1
        self._torn = len(data) - complete  # a torn last line: the step never returned
        entries = self._in_order(data[:complete].splitlines(), state.seq)
        if not self._writer:  # only where the journal ends is asked: folded without a copy per entry
            state, last = replayed(self.plan, state, entries)
            self._last_applied = last or self._last_applied
            return state, offset + complete
        for applied in replay(self.plan, state, entries):
            self._last_applied = applied
            self._remember(applied)  # another program's step: its events are ours to flush too
            state = applied.after(self.plan)
        return state, offset + complete

    def _in_order(self, lines: Iterable[bytes], after: int) -> Iterator[Entry]:
        return in_order(lines, after, self._damaged, JOURNAL)

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

    def entries(self, after: int = 0) -> list[Entry]:
        """Reads the journal from where entry `after + 1` starts (found by bisection: every
        line starts `{"seq":N,`), not from its beginning."""
        with self.locked() as state:
            return self._entries(after, state.seq)

    def _entries(self, after: int, last: int) -> list[Entry]:
        """`entries`, under the lock: the journal holds `last` entries."""
        if self._journal < 0 or after >= last:
            return []
        data = self._written_from(self._offset_of(after + 1))
        lines = data[: data.rfind(b"\n") + 1].splitlines()
        return list(self._in_order(lines, after)) if lines else []

    def _offset_of(self, seq: int) -> int:
        """Where entry `seq`'s line starts (the end of the written journal past its last entry)."""
        if seq <= 1:
            return 0
        low, high = 0, os.fstat(self._journal).st_size  # entry `seq` starts at or before `high`
        while low < high:
            middle = (low + high) // 2
            start, found = self._line_after(middle)
            if found is None or found >= seq:
                high = middle
            else:
                low = start + 1
        start, _ = self._line_after(low)
        return start

    def _line_after(self, offset: int) -> tuple[int, int | None]:
        """The first line starting at or after `offset`: where, and the entry it holds."""
        if offset > 0:
            piece = os.pread(self._journal, READ_PIECE, offset - 1)
            newline = piece.find(b"\n")
            while newline < 0 and piece and b"\0" not in piece:
                offset += len(piece)
                piece = os.pread(self._journal, READ_PIECE, offset - 1)
                newline = piece.find(b"\n")
            offset = offset + newline if newline >= 0 else offset + len(piece)
        head = os.pread(self._journal, 32, offset)
        match = _SEQ_HEAD.match(head)
        return offset, int(match.group(1)) if match else None

    # -- writing -------------------------------------------------------------------

    def replayed(self, request: Request) -> bool:
        return False  # the journal does not say which reply used an attempt id (module docstring)

    def behind(self, state: ProcessState) -> bool:
        return False  # read under the file lock: current

    def alive(self, runner: str) -> bool | None:
        return None  # a run folder holds no lease: the runner's machine is asked

    def commit(self, steps: Sequence[Applied], after: ProcessState, request: Request | None = None) -> None:
        """Append the entries in one write and sync them: from then on the step has
        happened. The derived files follow, and a failure of theirs is logged and repaired
        later, never raised."""
        self._become_writer(steps[0].before)
        lines = [json_line(to_json(applied.entry)) for applied in steps]
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
        if complete or after.seq // FLUSH_EVERY > (first - 1) // FLUSH_EVERY:  # passed a multiple
            self._flush_events()
        if snapshot_due(first - 1, after.seq, start - self._snapshot[0], self._snapshot[1]):
            self._write_snapshot(steps[-1], start)

    def _derive_quietly(self, work: Any) -> None:
        """Write derived files; on failure (a full disk, say) log it and repair them later."""
        try:
            work()
        except OSError as error:
            self._repaired = False
            log.warning(
                "run %s: derived files not written (%s); they are rebuilt from the journal at the run's "
                "next step, or by `todoflow run --resume` once it is complete",
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
        for learning in learned(self.plan, self.process_id, self.definition_sha256, applied):
            try:
                self.learnings.add(learning)
            except LearningError as error:
                log.warning("run %s: %s", self.process_id, error)

    def _write_snapshot(self, applied: Applied, start: int) -> None:
        """The state before the last entry, and where that entry starts: loading then
        replays at least that one entry, so a writer always knows the entry whose events
        end events.jsonl.

        The old snapshot is removed first, so the new one is renamed into no file's place:
        renamed over one, ext4 writes its data out at once (`auto_da_alloc`), ~0.25 ms, more
        than a step. A reader (or a crash) in between finds no snapshot and replays the
        journal from its start, as it does with a damaged one."""
        snapshot = json_line({"offset": start, "state": state_json(applied.before, self.plan)})
        path = self.folder / SNAPSHOT
        path.unlink(missing_ok=True)
        write_atomically(path, snapshot.decode())
        self._snapshot = (start, len(snapshot))

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

    def repair(self, quick: bool = False) -> bool:
        """Rebuild events.jsonl, todos/ and the learnings from the journal where a crash or
        a full disk left them behind it; True when something was rebuilt. Every entry's
        events are checked, and every learning events.jsonl records. `quick` (a program
        opening a run to drive it): only a complete run, and only when the end of its
        events.jsonl shows a crash's mark, looked at without opening anything for writing,
        so opening costs a small read and writes nothing. What cannot be written (a full
        disk, a read-only folder) is logged and left to the next writer (`gaps`)."""
        with self.locked() as state:
            if quick and not self._writer and not self._behind(state):
                return False
            try:
                self._open_for_writing()
            except StoreError as error:
                log.warning("run %s: derived files not repaired: %s", self.process_id, error)
                return False
            rebuilt: list[bool] = []
            self._derive_quietly(lambda: rebuilt.append(self._repair_locked(state)))
            return rebuilt == [True]

    def _behind(self, state: ProcessState) -> bool:
        """`repair(quick=True)`'s look, at a complete run only (one that is not gets a next
        step, which repairs first), reading the end of events.jsonl: whether it ends with
        exactly the last entry's events. Its writers append events in journal order after
        the todos and learnings of their entries and replace the file whole, so what a
        crash or a full disk leaves behind shows at its end."""
        last = self._last_applied
        if not state.finished or state.seq == 0:
            return False
        if self._torn or last is None or last.seq != state.seq:
            return True
        lines = _event_lines(self.plan, self.process_id, [last])
        return _tail(self.folder / EVENTS, len(lines) + 1) not in (lines, b"\n" + lines)

    def _repair_locked(self, state: ProcessState) -> bool:
        """Under the lock, as a writer: leftovers of interrupted replaces removed, the torn
        last line erased, events.jsonl verified entry by entry against the journal and
        rebuilt if any entry's events are missing (the learnings with them), a learning
        it records but the learnings lack written again, the current step's todos refreshed."""
        for leftover in [*self.folder.glob(".*.*"), *self.folder.glob(f"{TODOS}/.*.*")]:
            if not leftover.name.startswith(".spare-"):
                leftover.unlink(missing_ok=True)
        if self._torn:
            os.pwrite(self._journal, b"\0" * self._torn, self._offset)
            os.fsync(self._journal)
            self._torn = 0
        data = _reads(self.folder / EVENTS)
        rebuilt = not self._events_match(state, data)
        if rebuilt:
            self._rebuild_events()
        else:
            self._pending = [self._last_applied] if self._last_applied is not None else []
            if self._learnings_missing(data):
                self._record_learnings(self._replayed_all(state.seq))
                rebuilt = True
        self._write_todos(state, only_if_changed=True)
        self._repaired, self._todos_behind = True, False
        return rebuilt

    def _learnings_missing(self, data: str | None) -> bool:
        """Whether a learning events.jsonl records (`TodoTaskLearningRecorded`) is missing
        from the learnings: written before its events, it is there unless removed since."""
        if self.learnings is None or not data or _RECORDED not in data:
            return False
        named: dict[str, set[str]] = {}
        for line in data.splitlines():
            if line.startswith(_RECORDED):
                event = json.loads(line)
                named.setdefault(event["sub_step_id"], set()).add(event["learning_id"])
        try:
            return any(
                not ids <= {record.id for record in self.learnings.records(sub_step)}
                for sub_step, ids in named.items()
            )
        except LearningError:
            return False  # a learnings folder that cannot be read: `gaps` says so

    def _replayed_all(self, last: int) -> list[Applied]:
        """Every entry of the journal, up to `last`, with the states before and after it."""
        start = initial_state(self.plan, self.started_at)
        return list(replay(self.plan, start, self._entries(0, last)))

    def _events_match(self, state: ProcessState, data: str | None) -> bool:
        """Whether events.jsonl (`data`) holds the events of every journal entry, 1 to the
        last, in order, and ends with exactly the last entry's events (a crash can cut a
        batch at the end of a line inside one entry's events)."""
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
        replayed = self._replayed_all(self._state.seq if self._state else 0)
        for applied in replayed:
            if applied.settled.step_complete:
                self._write_todos(applied.settled, only_if_changed=True)
        self._record_learnings(replayed)
        write_atomically(self.folder / EVENTS, _event_lines(self.plan, self.process_id, replayed).decode())
        if self._events >= 0:
            os.close(self._events)
        self._open_events()
        self._pending = replayed[-1:]

    # -- derived files against the journal ---------------------------------------------

    def gaps(self) -> list[str]:
        """What the derived files lack against the journal, one line each (none: they
        match): events.jsonl exactly the events of every entry, the todos of every
        completed todo_task step, the learning of every validated delegation. Reads only."""
        with self.locked() as state:
            replayed = self._replayed_all(state.seq)
            return [*self._events_gap(replayed), *self._todos_gaps(replayed), *self._learnings_gap(replayed)]

    def _events_gap(self, replayed: Sequence[Applied]) -> list[str]:
        data = _reads_bytes(self.folder / EVENTS)
        if data == _event_lines(self.plan, self.process_id, replayed) or (data is None and not replayed):
            return []
        if data is None:
            return [f"{EVENTS} is missing"]
        covered = sum(1 for _ in itertools.takewhile(lambda held: held, self._events_held(data, replayed)))
        if covered < len(replayed):
            return [f"{EVENTS} holds the events of {covered} of the journal's {len(replayed)} entries"]
        return [f"{EVENTS} holds more than the events of the journal's {len(replayed)} entries"]

    def _events_held(self, data: bytes, replayed: Sequence[Applied]) -> Iterator[bool]:
        """Per entry, in order: whether events.jsonl holds its events where they belong."""
        offset = 0
        for applied in replayed:
            lines = _event_lines(self.plan, self.process_id, [applied])
            yield data.startswith(lines, offset)
            offset += len(lines)

    def _todos_gaps(self, replayed: Sequence[Applied]) -> list[str]:
        final = {
            applied.settled.step_id: applied.settled
            for applied in replayed
            if applied.settled.step_complete and applied.settled.step_id is not None
        }
        found = []
        for step_id, settled in final.items():
            step = self.plan.step(step_id)
            if step.kind != "todo_task" or not settled.tasks:
                continue
            held = _reads(self.folder / TODOS / f"{step.id}.json")
            if held is None:
                found.append(f"{TODOS}/{step.id}.json is missing")
            elif held != todos(step, settled):
                found.append(f"{TODOS}/{step.id}.json differs from the journal's")
        return found

    def _learnings_gap(self, replayed: Sequence[Applied]) -> list[str]:
        if self.learnings is None:
            return []
        expected = learned(self.plan, self.process_id, self.definition_sha256, replayed)
        if not expected:
            return []
        try:
            held = {record.id for record in self.learnings.records()}
        except LearningError as error:
            return [str(error)]
        missing = [learning.seq for learning in expected if learning.id not in held]
        if not missing:
            return []
        entries = ", ".join(map(str, missing[:10])) + (", …" if len(missing) > 10 else "")
        return [
            f"{len(missing)} of the run's {len(expected)} learnings are missing from "
            f"{self.learnings.root} (proved by journal entries {entries})"
        ]


_SEQ_HEAD = re.compile(rb'\{"seq":(\d+),')  # how every journal line starts
_RECORDED = '{"event":"TodoTaskLearningRecorded",'  # how a learning's event starts its line
# every line of events.jsonl starts `{"event":"…","process_id":"…","seq":N,` (its field order)
_SEQ = re.compile(r'^\{"event":"[^"\n]*","process_id":"(?:[^"\\\n]|\\.)*","seq":(\d+),', re.M)


def _event_lines(plan: RunPlan, process_id: str, entries: Iterable[Applied]) -> bytes:
    """events.jsonl's lines for journal entries, each with the states before and after it."""
    return b"".join(
        json_line(event)
        for before, settled, entry in entries
        for event in entry_events(plan, before, settled, entry, process_id)
    )


def _lock_holders(path: Path) -> list[int]:
    """The processes holding a file lock on `path`, from Linux's /proc/locks (none where
    the system does not list them)."""
    try:
        status = os.stat(path)
        lines = Path("/proc/locks").read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    device = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    found = []
    for line in lines:  # `1: FLOCK  ADVISORY  READ 4242 fd:01:1234 0 EOF`; a waiter has `->`
        fields = line.split()
        if len(fields) > 5 and "->" not in fields and fields[1] == "FLOCK" and fields[5] == device:
            found.append(int(fields[4]))
    return found


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


def _reads_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _tail(path: Path, size: int) -> bytes:
    """The last `size` bytes of a file (fewer if it is shorter; none if it is missing)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
            return handle.read()
    except OSError:
        return b""


def _reads(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _written(data: bytes) -> bytes:
    """The journal's bytes up to its allocated but unwritten (zero) tail."""
    end = data.find(b"\0")
    return data if end < 0 else data[:end]


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
            size = handle.seek(0, os.SEEK_END)
            tail, piece = b"", 4096  # the last line, read from the end a piece at a time
            while True:
                start = max(0, size - len(tail) - piece)
                handle.seek(start)
                tail = handle.read(size - start)
                if start == 0 or tail.rfind(b"\n", 0, len(tail) - 1) >= 0 or len(tail) >= 1 << 20:
                    break
                piece *= 4
    except FileNotFoundError:
        return 0
    except OSError:
        return -1
    if not tail:
        return 0
    if not tail.endswith(b"\n"):
        return -1
    try:
        return int(pydantic_core.from_json(tail.splitlines()[-1])["seq"])
    except (ValueError, KeyError, TypeError):
        return -1


# -- the run folders of a folder ---------------------------------------------------


class FolderRuns:
    """Runs in run folders under one folder (`<run_dir>/<process-id>/`)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self.location = str(run_dir)

    def folder(self, process_id: str) -> Path:
        return self.run_dir / Path(process_id).name

    def create(
        self, files: Iterable[tuple[str, str]], meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
    ) -> None:
        plan_files = dict(files)
        if ready:
            plan_files[READY] = ready_text(ready)
        self._create(meta.process_id, plan_files, meta.text(), [])

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

    def load(self, process_id: str) -> OpenRun:
        folder = self.folder(process_id)
        meta = read_meta(folder)
        learnings = self.learnings(meta)
        plan = _plan(folder, meta)
        store = FolderStore(folder, plan, meta.process_id, meta.started_at, learnings, meta.source_sha256)
        return OpenRun(meta, store, learnings)

    def read_meta(self, process_id: str) -> RunMeta:
        return read_meta(self.folder(process_id))

    def metas(self) -> Iterator[tuple[str, RunMeta | StoreError]]:
        for folder, meta in all_metas(self.run_dir):
            yield folder.name, meta

    def plan_file(self, process_id: str, relative: str) -> str | None:
        path = self.folder(process_id) / "plan" / relative
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def learnings(self, meta: RunMeta | None) -> FolderLearnings | None:
        return FolderLearnings(Path(meta.learnings)) if meta is not None and meta.learnings else None

    def starts(self) -> FolderStarts:
        return FolderStarts(self.run_dir / ".starts")

    @contextlib.contextmanager
    def driving(self, process_id: str) -> Iterator[None]:
        """A shared lock on the run's `driving` file while inside: any number of programs
        may drive one run; `driven` only tries the lock."""
        handle = _open_existing(self.folder(process_id) / DRIVING, os.O_RDONLY)
        try:
            if handle >= 0:
                fcntl.flock(handle, fcntl.LOCK_SH)
            yield
        finally:
            if handle >= 0:
                os.close(handle)

    def driven(self, process_id: str) -> bool:
        handle = _open_existing(self.folder(process_id) / DRIVING, os.O_RDONLY)
        if handle < 0:
            return False
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(handle)  # releases the probe's lock
        return False

    def remove(self, process_id: str) -> None:
        """The run folder renamed aside first (one step: a listing never sees half a run),
        then deleted."""
        folder = self.folder(process_id)
        if not (folder / "run.json").is_file():
            raise StoreError(f"no run `{process_id}` in {self.location}")
        aside = folder.with_name(f".removed-{folder.name}-{os.getpid()}")
        try:
            os.rename(folder, aside)
            shutil.rmtree(aside)
        except OSError as error:
            raise StoreError(f"cannot remove run `{process_id}`: {error.strerror or error}") from None

    def driver(self, process_id: str) -> str | None:
        """Who holds the `driving` lock, as the kernel lists it (a driver writes nothing
        into the run: an MCP server drives every run it looks at)."""
        if not self.driven(process_id):
            return None
        holders = _lock_holders(self.folder(process_id) / DRIVING)
        return f"pid {holders[0]} on {socket.gethostname()}" if holders else "another program"

    def changes(self, process_id: str, seq: int) -> Iterator[None]:
        while True:  # a run folder tells nobody: look at it now, then now and then
            yield
            time.sleep(FOLLOW_POLL)

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

    def ready(self) -> str | None:
        """The folder of run folders, or the nearest folder it would be made in, is writable."""
        folder = self.run_dir.absolute()
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            return f"cannot write run folders in {self.run_dir}"
        return None

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
        self.folder = folder  # made by the first `prepare`: a server may start before it can write

    def prepare(self, start_id: str, record: StartRecord) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomically(self.folder / f"{start_id}.json", record.model_dump_json() + "\n")
        except OSError as error:
            raise StoreError(f"cannot prepare a start in {self.folder}: {error.strerror or error}") from None

    def executed(self, start_id: str) -> str | None:
        path = self.folder / f"{start_id}.executed"
        return path.read_text(encoding="utf-8").strip() if path.exists() else None

    def record(self, start_id: str) -> StartRecord | None:
        try:
            return StartRecord.model_validate_json((self.folder / f"{start_id}.json").read_bytes())
        except (OSError, ValueError):
            return None

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
        for entry in self.folder.iterdir() if self.folder.is_dir() else ():
            try:
                if entry.stat().st_mtime < limit:
                    entry.unlink()
            except OSError:
                continue


def _plan(folder: Path, meta: RunMeta) -> RunPlan:
    """The plan a run folder's run walks, built once per process for its stored files: their
    sha256 the run recorded, and each file's identity as it is now, so a file replaced
    since is read again (the folder is part of the key: its templates are read from it)."""

    def build() -> RunPlan:
        plan = load_plan(folder / "plan", meta.workflow_id, meta.title or meta.workflow_id)
        ready_file = folder / "plan" / READY
        ready = ready_file.read_text(encoding="utf-8") if ready_file.exists() else None
        return run_plan(plan, meta.goal, ready, meta.max_turns)

    stored = os.path.join(folder, "plan")
    files = tuple(_identity(os.path.join(stored, name)) for name in _PLAN_FILES)
    key = (str(folder), files, meta.plan_sha256, meta.goal, meta.workflow_id, meta.title, meta.max_turns)
    return kept_plan(key, build)


_PLAN_FILES = ("plan.json", "step_config.json", READY)  # what a stored plan is built from, but templates


def _identity(path: str) -> tuple[int, int, int] | None:
    """A file as it is now (None: there is none): a replaced or rewritten file is another."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


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


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- learnings ------------------------------------------------------------------


class FolderLearnings:
    """A learnings folder: one `learnings.jsonl` per sub-step id (the seed's layout)."""

    def __init__(self, root: Path) -> None:
        self.root, self.location = root, str(root)
        # per file: its identity, how far it has been read, the ids it holds to there;
        # so adding a record reads only what others appended since, not the whole file
        self._read_to: dict[Path, tuple[tuple[int, int], int, set[str]]] = {}
        self._files: dict[str, Path] = {}  # a record is added at every validated todo

    def file(self, sub_step_id: str) -> Path:
        path = self._files.get(sub_step_id)
        if path is None:
            if not PLAIN.match(sub_step_id):
                raise LearningError(
                    f"step id `{sub_step_id}` is not a plain name; it cannot name a learnings folder"
                )
            path = self._files[sub_step_id] = self.root / sub_step_id / LEARNINGS_FILE
        return path

    def add(self, learning: Learning) -> bool:
        """Append `learning` unless a record with its id is there; True when written."""
        path = self.file(learning.sub_step_id)
        try:
            handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        except FileNotFoundError:  # its folder is not there yet
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            ids = self._ids_held(path, handle)
            if learning.id in ids:
                return False
            data = (learning.model_dump_json() + "\n").encode()
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
            identity, offset, _ = self._read_to[path]
            ids.add(learning.id)
            self._read_to[path] = (identity, offset + len(data), ids)
            return True
        finally:
            os.close(handle)  # releases the lock

    def _ids_held(self, path: Path, handle: int) -> set[str]:
        """The ids `path` holds, read under its lock: what is known, plus what was appended
        since (a file replaced or shortened is read again from its start)."""
        status = os.fstat(handle)
        identity = (status.st_dev, status.st_ino)
        known, offset, ids = self._read_to.get(path, (identity, 0, set()))
        if known != identity or status.st_size < offset:
            offset, ids = 0, set()
        if status.st_size == offset:  # nobody appended since: nothing to read
            self._read_to[path] = (identity, offset, ids)
            return ids
        os.lseek(handle, offset, os.SEEK_SET)
        added = b""
        while chunk := os.read(handle, 1 << 20):
            added += chunk
        if added and not added.endswith(b"\n"):  # a writer killed mid-line: debris, as it held the lock
            added = added[: added.rfind(b"\n") + 1]
            os.ftruncate(handle, offset + len(added))
        ids.update(i for i in map(_line_id, added.splitlines()) if i is not None)
        self._read_to[path] = (identity, offset + len(added), ids)
        return ids

    def records(self, sub_step_id: str | None = None) -> list[Learning]:
        """Every record (of one sub-step, or of all), oldest first, each as its last line says."""
        folders = [sub_step_id] if sub_step_id else sorted(p.name for p in self._folders())
        found: dict[str, Learning] = {}
        for name in folders:
            for learning in self._read(self.file(name)):
                found.pop(learning.id, None)  # a retirement moves it to where it was retired
                found[learning.id] = learning
        return sorted(found.values(), key=lambda learning: (learning.at, learning.id))

    def find(self, learning_id: str) -> Learning:
        for learning in self.records():
            if learning.id == learning_id:
                return learning
        raise LearningError(f"no learning `{learning_id}` in {self.root}")

    def retire(self, learning_id: str, at: str) -> Learning:
        learning = self.find(learning_id)
        if learning.status == "retired":
            return learning
        retired = learning.retired(at)
        path = self.file(learning.sub_step_id)
        with open(path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            handle.write(retired.model_dump_json() + "\n")
        return retired

    def lines(self, process_id: str) -> list[tuple[str, str]]:
        """(sub-step id, line) of every line a process's records hold, in each file's order:
        a run's learnings as they move to another store."""
        found = []
        for folder in sorted(p.name for p in self._folders()):
            for line in self.file(folder).read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValidationError):
                    if Learning.model_validate_json(line).process_id == process_id:
                        found.append((folder, line))
        return found

    def add_lines(self, lines: Iterable[tuple[str, str]]) -> None:
        """Append the lines (of `lines`) that are not there yet: a record, or its retirement."""
        for sub_step_id, line in lines:
            record = Learning.model_validate_json(line)
            path = self.file(sub_step_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a+", encoding="utf-8") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                handle.seek(0)
                held = [
                    Learning.model_validate_json(held) for held in handle.read().splitlines() if held.strip()
                ]
                if not any((h.id, h.status) == (record.id, record.status) for h in held):
                    handle.write(line + "\n")

    def _folders(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if (p / LEARNINGS_FILE).is_file() and PLAIN.match(p.name)]

    def _read(self, path: Path) -> list[Learning]:
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        except OSError as error:
            raise LearningError(f"cannot read {path}: {error.strerror or error}") from None
        found = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                found.append(Learning.model_validate_json(line))
            except ValidationError:
                log.warning("%s:%d is not a learning record; it is left out", path, number)
        return found


def _line_id(line: bytes) -> str | None:
    try:
        value = json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


register(FOLDER)(FolderRuns)  # a path: a folder of run folders, the default location
