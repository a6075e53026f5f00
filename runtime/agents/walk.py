"""A path of the machine walked through the real engine with synthetic replies, checking
the engine's invariants at every step: what the pytest plugin's `todoflow_paths` runs.

A walk starts a run in a location of this process's memory (`memory://`) and takes the
events of a path (`compiler.paths`): the path's own step along it, every other step
along its shortest path. Each event is sent as the reply an agent, the caller or a
person would send; a learn_code step's intake is its runner's, through `fast_path.due`,
as `todoflow run` passes it on when no `main.py` is there. A step's expected files are
written into the walk's workspace when its completion needs them, after the completion
without them was refused; a route's, before its sub-agent's answer. Before every event
the walk sends replies the engine must refuse (a stale attempt, an empty reply, an
orchestrator's `complete` with a todo open), and around it checks (`INVARIANTS`, named
as docs/testing.md lists them):

- the engine moves as the machine does: it is where the path says before and after each
  event (step, node, position, blocked, delegated to whom);
- every directive can be handed out: it renders, prompt included (a template that fails
  only after, say, an accepted delegation fails the paths that take one);
- one task is handed out at a time: the directive's todo is the cursor's, every todo
  before it completed, every one after it pending;
- a confirmation is applied exactly once: one journal entry at the cursor's position,
  its outcome recorded there, and the same reply sent again with its attempt id is not
  applied again;
- positions are stable across revisions: a revision keeps the tasks before the position
  it resumes from, and their results; nothing but an intake or a revision changes the list;
- the run completes only past the end of its last step, and then answers `{}`;
- every refusal changes nothing: the state, the journal, the events, the attempt id;
- the engine refuses what it must, and accepts the path's replies.

The first invariant that does not hold raises `InvariantBroken`, naming it, the path, the
event and what was seen. A path longer than a step's `max_turns` meets the bound: the walk
raises it, as `run --resume --max-turns` does, and checks that nothing else changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from todoflow.compiler.checklist import MAX_TEXT
from todoflow.compiler.paths import ADVANCES, GENERIC, RESUME, FlowPaths, PathEvent, PathState, StepPath
from todoflow.dsl.diagnostics import TodoflowError

from .. import process
from ..definition import RunDefinition
from ..directive import Directive, PromptError
from ..engine import Engine, Refusal, Replayed
from ..entries import Confirm, SubAgentDone
from ..orchestrator import learn_code
from ..plan import RunStep
from ..state import ProcessState
from ..store.base import runs_at
from ..workspace import confined, missing
from . import fast_path

PROCESS = "path"
# the invariants, as a broken one is named (docs/testing.md lists them)
MOVES = "the engine moves as the machine does"
HANDED_OUT = "every directive can be handed out"
ONE_TASK = "one task is handed out at a time"
ONCE = "a confirmation is applied exactly once"
STABLE = "positions are stable across revisions"
COMPLETES = "the run completes only past the end of its last step, with `{}`"
REFUSALS = "every refusal changes nothing"
ACCEPTS = "the engine refuses what it must, and accepts the path's replies"
INVARIANTS = (MOVES, HANDED_OUT, ONE_TASK, ONCE, STABLE, COMPLETES, REFUSALS, ACCEPTS)
MORE_TURNS = 50  # how far a walk raises a step's bound of orchestrator turns when it meets it
_START = datetime(2026, 1, 1)


class InvariantBroken(TodoflowError):
    """An invariant of the engine did not hold on a path: which, where, and what was seen."""


class Taken(NamedTuple):
    """One event of a walk, and where the engine stood after it."""

    step_id: str
    label: str  # the path's event (`confirm 2`), or `raise turns`
    node: str
    position: int
    status: str  # the run's status: running, blocked, complete


class Walk(NamedTuple):
    path: str
    taken: tuple[Taken, ...]
    result: dict[str, Any]  # the last directive: `{"processId": …, "completed": true, "result": {}}`


class _Clock:
    """One second per reading, from a fixed start: a walk is deterministic."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> str:
        self.ticks += 1
        return (_START + timedelta(seconds=self.ticks)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class _Seen(NamedTuple):
    """What a refusal must leave as it was."""

    state: ProcessState
    entries: int  # the journal's (a store derives whatever else it keeps from it)
    attempt: str


class _Sent(NamedTuple):
    attempt: str
    reply: Mapping[str, Any]
    by: str


def walk(definition: RunDefinition, paths: FlowPaths, path: StepPath, workspace: Path) -> Walk:
    """Walk `path` through a new run of `definition` (every other step along its shortest
    path); raises `InvariantBroken` at the first invariant that does not hold."""
    walker = _Walker(definition, paths, path, workspace)
    try:
        legs = paths.legs(path)
        for number, (step_id, events) in enumerate(legs, start=1):
            for index, event in enumerate(events, start=1):
                walker.take(step_id, event, last=number == len(legs) and index == len(events))
        return walker.finish()
    finally:
        walker.close()  # the walk's memory location is gone, whatever broke


class _Walker:
    def __init__(self, definition: RunDefinition, paths: FlowPaths, path: StepPath, workspace: Path) -> None:
        self.definition, self.paths, self.path, self.workspace = definition, paths, path, workspace
        self.clock = _Clock()
        self.runs = runs_at(f"memory://walk-{secrets.token_hex(8)}")
        process.start(
            definition, self.runs, workspace=workspace, process_id=PROCESS, clock=self.clock
        ).close()
        self.store = self.runs.load(PROCESS).store
        self.driving = self.runs.driving(PROCESS)  # the walk drives the run: it is `running`, or `blocked`
        self.driving.__enter__()
        self.engine = self._open()
        self.taken: list[Taken] = []
        self.sent: _Sent | None = None
        self.where = "the start"

    def _open(self) -> Engine:
        workflow = {"id": self.definition.workflow_id, "title": self.definition.title}
        return Engine(self.store, self.workspace, workflow, self.clock)

    def take(self, step_id: str, event: PathEvent, last: bool) -> None:
        self.where = f"`{event.label}` of step `{step_id}`"
        directive = self._unbound(self.engine.directive(), event)
        self._at(directive, step_id, event.source, "before")
        self._one_task(directive)
        self._handed_out(directive)
        self._probe(directive, step_id)
        before, entries = directive.state, len(self.store.entries())
        directive = self._send(directive, self.definition.plan.step(step_id), event)
        if directive.completed != last:
            early = "the run is complete before the path's last event"
            self._broken(COMPLETES, early if directive.completed else f"the run is at {_seen(directive)}")
        self._confirmed_once(before, directive, entries, event)
        self._stable(before, directive.state, event)
        self._at(directive, step_id, event.target, "after")
        self._one_task(directive)
        state = directive.state
        status = directive.status(self.runs.driven(PROCESS))
        self.taken.append(Taken(step_id, event.label, state.node, state.position, status))

    def finish(self) -> Walk:
        self.where = "the end of the path"
        directive = self.engine.directive()
        if not directive.completed:
            self._broken(COMPLETES, f"after the path's last event the run is at {_seen(directive)}")
        result = directive.to_json()
        if result != {"processId": PROCESS, "completed": True, "result": {}}:
            self._broken(COMPLETES, f"the completed run answered {result}")
        self._refused(directive, _confirmation(1), "a reply after the end")
        return Walk(self.path.id, tuple(self.taken), result)

    def close(self) -> None:
        self.driving.__exit__(None, None, None)
        self.runs.close()

    def _unbound(self, directive: Directive, event: PathEvent) -> Directive:
        """At a step's bound of orchestrator turns: the bound raised, and nothing else."""
        if directive.blocked is None:
            return directive
        before = directive.state
        raised = self.engine.raise_turns(directive.attempt_id, before.turns + MORE_TURNS)
        after = raised.state
        if (after.step_id, after.node, after.position, after.tasks) != (
            before.step_id,
            before.node,
            before.position,
            before.tasks,
        ):
            self._broken(MOVES, f"raising the bound of turns moved the run to {_seen(raised)}")
        self.taken.append(Taken(after.step_id or "", "raise turns", after.node, after.position, "running"))
        return raised

    # -- the replies -------------------------------------------------------------------

    def _send(self, directive: Directive, step: RunStep, event: PathEvent) -> Directive:
        if event.event == "submit_tasks":
            return self._intake(directive, step)
        if event.event == RESUME:
            self.engine = self._open()  # the run reopened, as `run --resume` does
            reopened = self.engine.directive()
            if (reopened.state, reopened.attempt_id) != (directive.state, directive.attempt_id):
                self._broken(MOVES, f"the run reopened at {_seen(reopened)}, not where it stopped")
            update = {"todo_id": f"todo_{event.position}", "status": "in_progress"}
            return self._step(directive, {"update_todo": update}, "agent")
        if event.event == "accept_delegation" and event.source.agent != GENERIC:
            route = step.route(event.source.agent or "")
            self._write(route.step.expected_files if route is not None else ())
        reply = _reply(event, directive.state)
        if event.target.final:
            self._complete_only_with_files(directive, step, reply)
        return self._step(directive, reply, "agent")

    def _intake(self, directive: Directive, step: RunStep) -> Directive:
        count = self.paths.graph(step.id).tasks
        if learn_code(step):
            due, after = fast_path.due(self.engine, directive, False)  # the runner's intake, no main.py
            if due is None:
                self._broken(MOVES, f"a learn_code step's runner passed no intake on at {_seen(after)}")
        else:
            ready = directive.ready_reply()
            after = (
                self._step(directive, ready, "caller")
                if ready
                else self._step(directive, _composed(count), "agent")
            )
        if after.state.total != count:
            self._broken(MOVES, f"the checklist holds {after.state.total} tasks, the path's {count}")
        return after

    def _step(self, directive: Directive, reply: Mapping[str, Any], by: str) -> Directive:
        self.sent = _Sent(directive.attempt_id, reply, by)
        try:
            return self.engine.step(directive.attempt_id, reply, by)
        except Refusal as refusal:
            reason = refusal.reason
        self._broken(ACCEPTS, f"the path's reply was refused: {reason}")

    def _complete_only_with_files(
        self, directive: Directive, step: RunStep, reply: Mapping[str, Any]
    ) -> None:
        """A step completes only with its expected files: refused without them, then written."""
        absent = [name for name in step.expected_files if missing(self.workspace, name) is not None]
        if absent:
            self._refused(directive, reply, f"completing step `{step.id}` without {', '.join(absent)}")
            self._write(absent)

    def _write(self, names: Iterable[str]) -> None:
        for name in names:
            target = confined(self.workspace, name)
            if isinstance(target, str):
                self._broken(MOVES, f"the expected file cannot be written: {target}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"written by a path walk: {name}\n", encoding="utf-8")

    # -- the invariants ----------------------------------------------------------------

    def _probe(self, directive: Directive, step_id: str) -> None:
        """Replies the engine must refuse here; each must change nothing."""
        self._refused(
            directive, _confirmation(0), "a reply with a stale attempt", f"0-{directive.attempt_id}"
        )
        self._refused(directive, {}, "an empty reply")
        state = directive.state
        if self.definition.plan.step(step_id).kind == "todo_task" and state.node == "work":
            early = {"next_action": "complete", "completion_reason": "done early"}
            self._refused(directive, early, f"`complete` with todo_{state.position} open")

    def _refused(
        self, directive: Directive, reply: Mapping[str, Any], what: str, attempt: str | None = None
    ) -> None:
        seen = self._snapshot()
        try:
            self.engine.step(attempt or directive.attempt_id, reply, "agent")
        except Refusal as refusal:
            if refusal.directive.attempt_id != seen.attempt:
                self._broken(REFUSALS, f"{what} was refused with another attempt id")
        else:
            self._broken(ACCEPTS, f"{what} was accepted")
        after = self._snapshot()
        if after != seen:
            self._broken(REFUSALS, f"{what} was refused, and {_changed(seen, after)}")

    def _handed_out(self, directive: Directive) -> None:
        """The directive is what a client receives: its prompt renders."""
        try:
            directive.to_json()
            return
        except PromptError as error:
            problem = str(error)
        self._broken(HANDED_OUT, problem)  # outside the handler: no chained traceback

    def _snapshot(self) -> _Seen:
        directive = self.engine.directive()
        return _Seen(directive.state, len(self.store.entries()), directive.attempt_id)

    def _at(self, directive: Directive, step_id: str, expected: PathState, when: str) -> None:
        """The engine is where the path says: in the step, or past it once it is complete."""
        state = directive.state
        if expected.final:
            if state.step_id == step_id or state.completed_steps.count(step_id) != 1:
                self._broken(
                    MOVES,
                    f"the step completes once, past its last task; after it the run is at {_seen(directive)}",
                )
            return
        seen = (
            state.step_id,
            state.node,
            0 if state.node == "intake" else state.position,
            directive.todo_blocked is not None,
            state.delegation.agent if state.delegation is not None else None,
        )
        if seen != (step_id, expected.role, expected.position, expected.blocked, expected.agent):
            where = f"the path is at {expected.label}, the run at {_seen(directive)}"
            self._broken(MOVES, f"{when} it {where}")

    def _one_task(self, directive: Directive) -> None:
        state = directive.state
        if state.finished or state.node == "intake":
            return
        handed = state.node in ("work", "delegated")
        todo = f"todo_{state.position}" if handed else None
        if directive.todo_id != todo or (
            state.node == "work" and directive.task != state.tasks[state.position - 1]
        ):
            self._broken(ONE_TASK, f"the directive hands out {directive.todo_id}, not {todo}")
        for position in range(1, state.total + 1):
            status = state.status(position)
            if position < state.position:
                expected: tuple[str, ...] = ("completed",)
            elif position == state.position and handed:
                expected = ("in_progress", "blocked")
            else:
                expected = ("pending",)
            if status not in expected:
                cursor = f"the cursor at todo_{state.position} ({state.node})"
                self._broken(ONE_TASK, f"todo_{position} is {status} with {cursor}")

    def _confirmed_once(self, before: ProcessState, after: Directive, entries: int, event: PathEvent) -> None:
        new = self.store.entries(entries)
        confirmations = [
            e for e in new if isinstance(e, Confirm) or (isinstance(e, SubAgentDone) and e.passed)
        ]
        wanted = event.event in ADVANCES
        if len(confirmations) != wanted or (wanted and len(new) != 1):
            kinds = ", ".join(e.TYPE for e in new) or "nothing"
            self._broken(ONCE, f"the event journaled {kinds}")
        if not wanted:
            return
        entry = confirmations[0]
        assert isinstance(entry, Confirm | SubAgentDone)
        if entry.position != before.position:
            self._broken(ONCE, f"it confirmed todo_{entry.position}")
        state = after.state
        if (
            state.step_id == before.step_id
            and state.progress.results[before.position - 1] != entry.progress_execution_outcome
        ):
            self._broken(ONCE, f"todo_{before.position} does not hold its result")
        self._not_again()

    def _not_again(self) -> None:
        """The reply just applied, sent again with its attempt id, is not applied again."""
        assert self.sent is not None
        seen = self._snapshot()
        try:
            self.engine.step(self.sent.attempt, self.sent.reply, self.sent.by)
        except (Refusal, Replayed):
            pass
        else:
            self._broken(ONCE, "the same reply sent again was applied again")
        after = self._snapshot()
        if after != seen:
            self._broken(
                ONCE,
                f"the same reply sent again: {_changed(seen, after)}",
            )

    def _stable(self, before: ProcessState, after: ProcessState, event: PathEvent) -> None:
        """Positions are a task's identity: only an intake or a revision changes the list,
        and a revision keeps the tasks before the position it resumes from, and their results."""
        if after.step_id != before.step_id or event.event == "submit_tasks":
            return
        if event.event != "submit_revision":
            if after.tasks != before.tasks:
                self._broken(STABLE, f"`{event.label}` changed the checklist")
            return
        kept = event.position - 1
        if (
            after.tasks[:kept] != before.tasks[:kept]
            or after.progress.results[:kept] != before.progress.results[:kept]
        ):
            self._broken(STABLE, f"the tasks before todo_{event.position} changed")
        if after.position != event.position:
            self._broken(STABLE, f"the cursor resumed at todo_{after.position}")

    def _broken(self, invariant: str, seen: str) -> NoReturn:
        raise InvariantBroken(f"{invariant}: broken at {self.where} on path {self.path.id}: {seen}")


def _seen(directive: Directive) -> str:
    state = directive.state
    if state.finished:
        return "the end (complete)"
    where = f"step `{state.step_id}`, {state.node}"
    if state.node != "intake":
        where += f" {state.position} of {state.total}"
    if state.delegation is not None:
        where += f" to {state.delegation.agent}"
    return where + (" (blocked)" if directive.todo_blocked is not None else "")


def _changed(seen: _Seen, after: _Seen) -> str:
    if after.entries != seen.entries:
        return f"the journal went from {seen.entries} to {after.entries} entries"
    if after.attempt != seen.attempt:
        return f"the attempt id went from {seen.attempt} to {after.attempt}"
    return "the state changed"


def _confirmation(position: int) -> dict[str, str]:
    return {
        "evidence": f"evidence for todo_{position}",
        "progress_execution_outcome": f"todo_{position} done",
    }


def _reply(event: PathEvent, state: ProcessState) -> dict[str, Any]:
    """The reply that takes `event` at `state`."""
    p = event.position
    match event.event:
        case "confirm" | "accept_delegation":
            return _confirmation(p)
        case "delegate":
            generic = event.agent == GENERIC
            return {
                "next_action": "delegate",
                "selected_route_id": None if generic else event.agent,
                "use_generic_agent": generic,
                "todo_id_to_execute": f"todo_{p}",
                "instructions_to_sub_agent": f"Do todo_{p} and say how you checked it.",
            }
        case "return_delegation":
            return {"failed": f"todo_{p} cannot be done by this agent"}
        case "teleport_revise_tasks":
            return {"teleportTo": "teleport-revise-tasks"}
        case "submit_revision":
            revised = f" (revision {event.target.revisions})"
            tasks = [
                {
                    "action": t.action if i < p - 1 else t.action[: MAX_TEXT - len(revised)] + revised,
                    "expected_result": t.expected_result,
                }
                for i, t in enumerate(state.tasks)
            ]
            return {
                "tasks": tasks,
                "resume_from_task": p,
                "progress_checklist_outcome": f"revised from todo_{p}",
                "progress_execution_outcome": f"{p - 1} todos done before the revision",
            }
        case "block":
            return {
                "update_todo": {"todo_id": f"todo_{p}", "status": "blocked", "notes": "waiting for a person"}
            }
    raise InvariantBroken(f"a path walk has no reply for the event `{event.event}`")


def _composed(count: int) -> dict[str, Any]:
    tasks = [{"action": f"Task {i}", "expected_result": f"task {i} is done"} for i in range(1, count + 1)]
    return {"tasks": tasks, "progress_checklist_outcome": f"{count} tasks composed"}
