"""Learnings: what a validated delegation to a route taught, one auditable record each.

`learnings/<sub-step-id>/learnings.jsonl` (the seed's folder; `learn_code`'s `main.py`
lives in `learnings/<step-id>/`), append-only. A record is derived from the journal
entry that proves it — the sub-agent's reply that passed prevalidation — and the state
before it (the delegation's instructions), so it can be written again at any time with
the same content: the store writes it when that entry is committed, under the file's
lock and only if its id is not there yet, and a repair writes what a crash left out.
Exactly once, whatever is killed when. Retiring a record appends it again with the
status `retired`: the last line of an id is its status.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from todoflow.dsl.diagnostics import TodoflowError

from .entries import SubAgentDone
from .events import learning_id
from .plan import RunPlan
from .state import ProcessState

FILE = "learnings.jsonl"
MAX_OFFERED = 5  # the most recent active learnings a sub-agent's directive offers
MAX_OFFERED_CHARACTERS = 4_000  # and at most this much of their text in all
PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

log = logging.getLogger("todoflow.learnings")


class LearningError(TodoflowError):
    """A learnings folder or record that cannot be used, with the reason."""


class ValidatedFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    sha256: str


class Learning(BaseModel):
    """One record: when, which process and journal entry prove it, what was asked and
    what was delivered, the files prevalidation checked, and its status."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str  # `<process id>:<journal entry>`
    at: str
    process_id: str
    seq: int
    workflow_id: str
    step_id: str
    route_id: str
    sub_step_id: str
    todo_id: str
    todo_title: str
    instructions: str
    success_criteria: str | None
    evidence: str
    outcome: str
    files: list[ValidatedFile]
    definition_sha256: str | None
    status: Literal["active", "retired"] = "active"


def learning_of(
    plan: RunPlan, process_id: str, definition_sha256: str | None, before: ProcessState, entry: SubAgentDone
) -> Learning | None:
    """The learning a sub-agent's validated reply records (None: the generic agent, or
    a reply that did not pass)."""
    step = plan.step(entry.step)
    route = step.route(entry.agent)
    if not entry.passed or route is None or before.delegation is None:
        return None
    return Learning(
        id=learning_id(process_id, entry.seq),
        at=entry.at,
        process_id=process_id,
        seq=entry.seq,
        workflow_id=plan.workflow_id,
        step_id=step.id,
        route_id=route.id,
        sub_step_id=route.step_id,
        todo_id=f"todo_{entry.position}",
        todo_title=before.tasks[entry.position - 1].action,
        instructions=before.delegation.instructions,
        success_criteria=before.delegation.success_criteria,
        evidence=entry.evidence,
        outcome=entry.progress_execution_outcome,
        files=[ValidatedFile(path=path, sha256=digest) for path, digest in entry.files],
        definition_sha256=definition_sha256,
    )


class Learnings:
    """A learnings folder: one `learnings.jsonl` per sub-step id."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # per file: its identity, how far it has been read, the ids it holds to there;
        # so adding a record reads only what others appended since, not the whole file
        self._read_to: dict[Path, tuple[tuple[int, int], int, set[str]]] = {}

    def file(self, sub_step_id: str) -> Path:
        if not PLAIN.match(sub_step_id):
            raise LearningError(
                f"step id `{sub_step_id}` is not a plain name; it cannot name a learnings folder"
            )
        return self.root / sub_step_id / FILE

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

    def offered(self, sub_step_id: str) -> list[Learning]:
        """The most recent active learnings of a sub-step, newest first, within the bounds."""
        active = [learning for learning in self.records(sub_step_id) if learning.status == "active"]
        active.sort(key=lambda learning: (learning.at, learning.id), reverse=True)
        chosen: list[Learning] = []
        used = 0
        for learning in active[:MAX_OFFERED]:
            size = len(learning.instructions) + len(learning.evidence) + len(learning.outcome)
            if chosen and used + size > MAX_OFFERED_CHARACTERS:
                break
            chosen.append(learning)
            used += size
        return chosen

    def find(self, learning_id: str) -> Learning:
        for learning in self.records():
            if learning.id == learning_id:
                return learning
        raise LearningError(f"no learning `{learning_id}` in {self.root}")

    def retire(self, learning_id: str, at: str) -> Learning:
        learning = self.find(learning_id)
        if learning.status == "retired":
            return learning
        retired = learning.model_copy(update={"status": "retired", "at": at})
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
        return [p for p in self.root.iterdir() if (p / FILE).is_file() and PLAIN.match(p.name)]

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
