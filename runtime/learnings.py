"""Learnings: what a validated delegation to a route taught, one auditable record each.

A record is derived from the journal entry that proves it — the sub-agent's reply that
passed prevalidation — and the state before it (the delegation's instructions), so it
can be written again at any time with the same content: a store writes it when that
entry is committed, only if its id is not there yet, and a repair writes what a crash
left out. Exactly once, whatever is killed when. Retiring a record appends it again with
the status `retired`: the last line of an id is its status. Where records live is the
store's (`store.base.LearningStore`: `learnings/<sub-step-id>/learnings.jsonl` in a
folder, the seed's; a table in a database); `learn_code`'s `main.py` lives in the
learnings folder's `<step-id>/`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from todoflow.dsl.diagnostics import TodoflowError

from .entries import SubAgentDone
from .events import learning_id
from .plan import RunPlan
from .state import Applied, ProcessState

LEARNINGS_FILE = "learnings.jsonl"  # a sub-step's records in a learnings folder (the seed's name)
MAX_OFFERED = 5  # the most recent active learnings a sub-agent's directive offers
MAX_OFFERED_CHARACTERS = 4_000  # and at most this much of their text in all
PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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
    retired_at: str | None = Field(default=None, exclude_if=lambda at: at is None)  # `at` stays

    def retired(self, at: str) -> Learning:
        """The record's retirement: the same record, `retired` at `at`."""
        return self.model_copy(update={"status": "retired", "retired_at": at})


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


def learned(
    plan: RunPlan, process_id: str, definition_sha256: str | None, steps: Iterable[Applied]
) -> list[Learning]:
    """The learnings the entries of `steps` record: one per validated delegation to a route."""
    found = []
    for before, _, entry in steps:
        if isinstance(entry, SubAgentDone) and entry.passed:
            learning = learning_of(plan, process_id, definition_sha256, before, entry)
            if learning is not None:
                found.append(learning)
    return found


def offered(records: Iterable[Learning]) -> list[Learning]:
    """The most recent active learnings of a sub-step's records, newest first, within the bounds."""
    active = [learning for learning in records if learning.status == "active"]
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
