"""The memory adapter: runs kept in this process only, for tests, benchmarks, dry runs
and embedding (`memory://NAME` names one location of the process; every `runs_at` of
the same name gives the same runs).

It keeps what a durable store keeps — the journal, which reply used each attempt id
(so a retried reply is `Replayed`, as in every store), the learnings, the starts — and
derives the seed's events from the journal for whoever looks (when asked: a step pays
for nothing nobody reads, as a replay's thousand steps would).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pydantic_core

from ..entries import Entry, entry_from_json, to_json
from ..events import entry_events
from ..learnings import Learning, LearningError, learned
from ..plan import RunPlan, Task, plan_from_files, run_plan
from ..state import Applied, ProcessState, initial_state, replay
from .base import (
    READY,
    OpenRun,
    Request,
    RunMeta,
    RunRecord,
    StartRecord,
    StoreError,
    forget,
    ready_text,
    register,
    this_program,
)


class MemoryStore:
    """A run's journal in memory."""

    shared = False

    def __init__(
        self,
        process_id: str,
        plan: RunPlan,
        started_at: str,
        learnings: MemoryLearnings | None = None,
        definition_sha256: str | None = None,
    ) -> None:
        self.process_id, self.plan, self.started_at = process_id, plan, started_at
        self.state = initial_state(plan, started_at)
        self.journal: list[Entry] = []
        self.requests: dict[str, Request] = {}  # attempt id -> the reply that used it
        self.learnings, self.definition_sha256 = learnings, definition_sha256
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def locked(self, cached: bool = False) -> Iterator[ProcessState]:
        with self._lock:
            yield self.state

    def commit(self, steps: Sequence[Applied], after: ProcessState, request: Request | None = None) -> None:
        self.journal += [applied.entry for applied in steps]
        if self.learnings is not None:
            for learning in learned(self.plan, self.process_id, self.definition_sha256, steps):
                self.learnings.add(learning)
        if request is not None:
            self.requests[request.attempt] = request  # its digest is computed if a retry asks
        self.state = after

    @property
    def events(self) -> list[dict[str, Any]]:
        """The seed's events of the journal, as a run folder's events.jsonl holds them."""
        steps = replay(self.plan, initial_state(self.plan, self.started_at), self.journal)
        return [event for s in steps for event in entry_events(self.plan, *s, self.process_id)]

    def replayed(self, request: Request) -> bool:
        used = self.requests.get(request.attempt)
        return used is not None and used.digest == request.digest

    def behind(self, state: ProcessState) -> bool:
        return False

    def alive(self, runner: str) -> bool | None:
        return None  # one program's memory: nobody else runs anything in it

    def entries(self, after: int = 0) -> list[Entry]:
        return self.journal[after:]

    def close(self) -> None:
        """Nothing to release."""


class MemoryLearnings:
    """Learnings records in memory: the lines a learnings file would hold, in order."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._lines: list[tuple[str, Learning]] = []
        self._lock = threading.Lock()

    def add(self, learning: Learning) -> bool:
        with self._lock:
            if any(held.id == learning.id for _, held in self._lines):
                return False
            self._lines.append((learning.sub_step_id, learning))
            return True

    def records(self, sub_step_id: str | None = None) -> list[Learning]:
        found: dict[str, Learning] = {}
        for sub, learning in self._lines:
            if sub_step_id is None or sub == sub_step_id:
                found.pop(learning.id, None)  # a retirement moves it to where it was retired
                found[learning.id] = learning
        return sorted(found.values(), key=lambda learning: (learning.at, learning.id))

    def find(self, learning_id: str) -> Learning:
        learning = next((r for r in self.records() if r.id == learning_id), None)
        if learning is None:
            raise LearningError(f"no learning `{learning_id}` in {self.location}")
        return learning

    def retire(self, learning_id: str, at: str) -> Learning:
        learning = self.find(learning_id)
        if learning.status == "retired":
            return learning
        retired = learning.retired(at)
        with self._lock:
            self._lines.append((retired.sub_step_id, retired))
        return retired

    def lines(self, process_id: str) -> list[tuple[str, str]]:
        return [(sub, r.model_dump_json()) for sub, r in self._lines if r.process_id == process_id]

    def add_lines(self, lines: Iterable[tuple[str, str]]) -> None:
        with self._lock:
            for sub, line in lines:
                record = Learning.model_validate_json(line)
                if not any((h.id, h.status) == (record.id, record.status) for _, h in self._lines):
                    self._lines.append((sub, record))


class MemoryStarts:
    def __init__(self) -> None:
        self._records: dict[str, tuple[float, StartRecord]] = {}
        self._executed: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def prepare(self, start_id: str, record: StartRecord) -> None:
        with self._lock:
            self._records[start_id] = (time.time(), record)

    def executed(self, start_id: str) -> str | None:
        found = self._executed.get(start_id)
        return None if found is None else found[1]

    def record(self, start_id: str) -> StartRecord | None:
        found = self._records.get(start_id)
        return None if found is None else found[1]

    def claim(self, start_id: str) -> bool:
        with self._lock:
            if start_id in self._executed:
                return False
            self._executed[start_id] = (time.time(), "")
            return True

    def done(self, start_id: str, process_id: str) -> None:
        with self._lock:
            self._executed[start_id] = (time.time(), process_id)
            self._records.pop(start_id, None)

    def release(self, start_id: str) -> None:
        with self._lock:
            self._executed.pop(start_id, None)

    def expire(self, older_than: float) -> None:
        limit = time.time() - older_than
        with self._lock:
            for table in (self._records, self._executed):
                for key in [k for k, (at, _) in table.items() if at < limit]:
                    del table[key]


class _Run:
    """What the location keeps of one run."""

    def __init__(self, meta: RunMeta, files: dict[str, str], store: MemoryStore) -> None:
        self.meta, self.files, self.store = meta, files, store
        self.drivers = 0


class MemoryRuns:
    """The runs of one `memory://` location of this process."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._runs: dict[str, _Run] = {}
        self._learnings = MemoryLearnings(location)
        self._starts = MemoryStarts()
        self._lock = threading.Lock()

    def create(
        self, files: Iterable[tuple[str, str]], meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
    ) -> None:
        stored = dict(files)
        if ready:
            stored[READY] = ready_text(ready)
        self._add(meta, stored, [])

    def _add(self, meta: RunMeta, files: dict[str, str], journal: list[Entry]) -> None:
        plan = run_plan(
            plan_from_files(files, meta.workflow_id, meta.title or meta.workflow_id),
            meta.goal,
            files.get(READY),
            meta.max_turns,
        )
        store = MemoryStore(meta.process_id, plan, meta.started_at, self._learnings, meta.source_sha256)
        with self._lock:
            if meta.process_id in self._runs:
                raise StoreError(f"there is a run `{meta.process_id}` in {self.location} already")
            self._runs[meta.process_id] = _Run(meta, files, store)
        if journal:
            steps = list(replay(plan, store.state, journal))
            store.commit(steps, steps[-1].after(plan))

    def _run(self, process_id: str) -> _Run:
        found = self._runs.get(process_id)
        if found is None:
            known = ", ".join(list(self._runs)[:20]) or "none"
            raise StoreError(f"no run `{process_id}` in {self.location} (runs: {known})")
        return found

    def load(self, process_id: str) -> OpenRun:
        run = self._run(process_id)
        return OpenRun(run.meta, run.store, self._learnings)

    def read_meta(self, process_id: str) -> RunMeta:
        return self._run(process_id).meta

    def metas(self) -> Iterator[tuple[str, RunMeta | StoreError]]:
        for process_id, run in reversed(list(self._runs.items())):
            yield process_id, run.meta

    def plan_file(self, process_id: str, relative: str) -> str | None:
        return self._run(process_id).files.get(relative)

    def learnings(self, meta: RunMeta | None) -> MemoryLearnings:
        return self._learnings

    def starts(self) -> MemoryStarts:
        return self._starts

    @contextlib.contextmanager
    def driving(self, process_id: str) -> Iterator[None]:
        run = self._run(process_id)
        run.drivers += 1
        try:
            yield
        finally:
            run.drivers -= 1

    def driven(self, process_id: str) -> bool:
        return self._run(process_id).drivers > 0

    def remove(self, process_id: str) -> None:
        with self._lock:
            self._run(process_id)  # an unknown id is an error, as everywhere
            del self._runs[process_id]

    def driver(self, process_id: str) -> str | None:
        return this_program() if self.driven(process_id) else None  # memory is this program's

    def changes(self, process_id: str, seq: int) -> Iterator[None]:
        while True:
            time.sleep(0.05)
            yield

    def export(self, process_id: str) -> RunRecord:
        run = self._run(process_id)
        journal = [pydantic_core.to_json(to_json(entry)).decode() for entry in run.store.journal]
        return RunRecord(
            process_id, run.meta.text(), dict(run.files), journal, self._learnings.lines(process_id)
        )

    def import_run(self, record: RunRecord) -> None:
        meta = RunMeta.model_validate_json(record.meta)
        self._learnings.add_lines(record.learnings)
        self._add(meta, dict(record.files), [entry_from_json(json.loads(line)) for line in record.journal])

    def ready(self) -> str | None:
        return None  # memory is always at hand

    def close(self) -> None:
        """The location and its runs are gone: the next `runs_at` of its name is empty."""
        forget(self.location, self)


register("memory", shared=True)(MemoryRuns)  # one location per name, for the life of the process
