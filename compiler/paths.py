"""The paths through each step's checklist machine, as xstate's graph tools find them.

A step's machine (`compiler.machine.checklist`, inside the workflow's machine) says which
events its nodes take. Its *path graph* unfolds it over what the machine leaves to
guards and counters: the cursor's position over a checklist of N tasks (the ready
checklist; a todo per route for a learn_code step without one, as its fast path plans
it; else `COMPOSED` tasks the agent writes at intake), the revisions taken (the revise
teleport at every position, up to K times), the agent a todo is delegated to (each
route, and the generic agent where the step allows it), and whether the todo is blocked.
Blocking is an engine state, not a machine event: a todo marked blocked (what a person's
`blocked <reason>` journals), and resumed (the run reopened and the todo taken up again).

The paths: for every transition of the graph, the shortest path from the step's start
through it and then the shortest way on to the step's end (xstate's `getShortestPaths`
breadth-first search, taken per transition, so every transition and every state is on a
path); a path found twice is kept once. Every event names the machine transitions it
takes — the cursor's automatic moves, and the step's `done_state` event at its end — so
the paths of a workflow take every transition of its machine. What an event does to the
cursor is the engine's rule (`runtime.state.settle`): a confirmation or an accepted
delegation moves it one on, the intake puts it at 1, a revision resumes where the
teleport left. Imports `compiler.machine` and the checked model only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from todoflow.dsl.nodes import node

from .machine import Machine, MachineState, MachineTransition
from .model import CheckedStep, CheckedWorkflow

COMPOSED = 2  # tasks of a checklist the agent composes at intake, on a path
GENERIC = "generic"
BLOCK, RESUME = "block", "resume"  # the engine's own events: no transition of the machine
ADVANCES = frozenset({"confirm", "accept_delegation"})  # the cursor moves one on
STARTS = frozenset({"submit_tasks"})  # the cursor at the first task
REVISES = frozenset({"submit_revision"})  # one more revision taken
TELEPORT, DELEGATE = "teleport_revise_tasks", "delegate"
FINAL = ("end", "done")
_LABELS = {
    "submit_tasks": "intake",
    "confirm": "confirm {p}",
    DELEGATE: "delegate {p} to {agent}",
    "accept_delegation": "accept {p}",
    "return_delegation": "give back {p}",
    TELEPORT: "teleport at {p}",
    "submit_revision": "revise from {p}",
    BLOCK: "block {p}",
    RESUME: "resume {p}",
}


@node
class PathState:
    """A state of a step's path graph: a node of its machine, unfolded."""

    role: str  # intake, work, delegated, revise; end (a todo_task step's) or done (a regular one's)
    position: int = 0  # the cursor, 1-based (0 before the intake and at the end)
    revisions: int = 0
    blocked: bool = False  # at work: the todo is marked blocked
    agent: str | None = None  # delegated: the route id, or `generic`

    @property
    def final(self) -> bool:
        return self.role in FINAL

    @property
    def label(self) -> str:
        if self.role == "intake" or self.final:
            return self.role
        text = f"{'blocked' if self.blocked else self.role} {self.position}"
        if self.agent is not None:
            text += f" to {self.agent}"
        return text + (f" (revision {self.revisions})" if self.revisions else "")


@node
class PathEvent:
    """One transition of a path graph: an event of the machine (or `block`, `resume`)."""

    event: str
    source: PathState
    target: PathState
    agent: str | None = None  # delegate: the route id, or `generic`
    transitions: tuple[MachineTransition, ...] = ()  # what it takes of the workflow's machine

    @property
    def position(self) -> int:
        return self.source.position

    @property
    def label(self) -> str:
        return _LABELS.get(self.event, self.event + " {p}").format(p=self.position, agent=self.agent)


@node
class StepPath:
    id: str  # `<step id>-<n>`, n from 1 in the order they were found
    step_id: str
    goal: PathEvent  # the transition it is the shortest path through
    events: tuple[PathEvent, ...]


@node
class StepGraph:
    step_id: str
    kind: str
    title: str
    tasks: int  # N: the checklist's length on every path
    checklist: str  # where the N tasks come from: `ready`, `fast path`, `composed`, `the step`
    agents: tuple[str, ...]  # who a todo may be delegated to
    states: tuple[PathState, ...]  # in breadth-first order from the start
    events: tuple[PathEvent, ...]
    paths: tuple[StepPath, ...]  # the first is the shortest way through the step


@node
class FlowPaths:
    workflow_id: str
    max_revisions: int
    machine: Machine
    graphs: tuple[StepGraph, ...]  # the steps that run, in run order

    def graph(self, step_id: str) -> StepGraph:
        return next(g for g in self.graphs if g.step_id == step_id)

    def legs(self, path: StepPath) -> tuple[tuple[str, tuple[PathEvent, ...]], ...]:
        """A whole run along `path`: its step along it, every other step along its shortest path."""
        return tuple(
            (g.step_id, next((p for p in g.paths if p == path), g.paths[0]).events) for g in self.graphs
        )

    def covered(self) -> set[MachineTransition]:
        return {t for g in self.graphs for p in g.paths for e in p.events for t in e.transitions}


def checklist_size(step: CheckedStep) -> tuple[int, str]:
    """The checklist's length on a path, and where its tasks come from."""
    if step.kind == "regular":
        return 1, "the step"
    if step.tasks:
        return len(step.tasks), "ready"
    if step.declared_execution_mode == "learn_code" and step.routes:
        return len(step.routes), "fast path"
    return COMPOSED, "composed"


def flow_paths(workflow: CheckedWorkflow, machine: Machine, max_revisions: int = 1) -> FlowPaths:
    """The path graph and paths of every step that runs, in run order."""
    compounds = {s.step_id: s for s in machine.states if s.role == "step"}
    order = _run_order(workflow, machine)
    graphs = tuple(
        _graph(workflow.step(step_id), compounds[step_id], machine, max_revisions) for step_id in order
    )
    return FlowPaths(workflow.id, max_revisions, machine, graphs)


def _run_order(workflow: CheckedWorkflow, machine: Machine) -> list[str]:
    """The steps that run, first to last: the machine's initial step, then each `next`."""
    first = next((s for s in machine.states if s.initial and s.role == "step"), None)
    order: list[str] = []
    step_id = first.step_id if first is not None else None
    while step_id is not None and step_id not in order:
        order.append(step_id)
        following = workflow.step(step_id).next_step_id
        step_id = following if following not in (None, "end") else None
    return order


class _Moves:
    """A step's machine by role: the event transitions, the automatic ones, the done event."""

    def __init__(self, compound: MachineState, machine: Machine) -> None:
        self.role = {child.id: child.role for child in compound.children}
        self.events: list[tuple[str, MachineTransition]] = []  # (source role, transition), machine order
        self.automatic: dict[str, list[MachineTransition]] = {}
        self.done = next(t for t in machine.transitions if t.source == compound.id)
        self.initial = next(c.role for c in compound.children if c.initial)
        for transition in machine.transitions:
            source = self.role.get(transition.source)
            if source is None:
                continue
            if transition.event is None:
                self.automatic.setdefault(source, []).append(transition)
            else:
                self.events.append((source, transition))

    def settle(
        self, transition: MachineTransition, position: int, tasks: int
    ) -> tuple[str, list[MachineTransition]]:
        """The role `transition` leads to through the automatic moves, and the transitions taken."""
        taken = [transition]
        role = self.role[transition.target]
        while role in self.automatic:
            guard = "has_task" if position <= tasks else "past_end"
            step = next(t for t in self.automatic[role] if t.cond == guard)
            taken.append(step)
            role = self.role[step.target]
        if role in FINAL:
            taken.append(self.done)
        return role, taken


def _graph(step: CheckedStep, compound: MachineState, machine: Machine, max_revisions: int) -> StepGraph:
    moves = _Moves(compound, machine)
    tasks, source = checklist_size(step)
    agents = (
        *(r.id for r in step.routes),
        *((GENERIC,) if step.generic_agent and step.kind == "todo_task" else ()),
    )
    start = PathState(moves.initial, 1 if moves.initial == "work" else 0)
    states, events = _explore(start, lambda s: _leaving(s, moves, tasks, agents, max_revisions))
    paths = tuple(_paths(step.id, start, events))
    return StepGraph(step.id, step.kind, step.title, tasks, source, agents, states, events, paths)


def _leaving(
    state: PathState, moves: _Moves, tasks: int, agents: tuple[str, ...], max_revisions: int
) -> Iterator[PathEvent]:
    """The transitions out of `state`, the way to the end first."""
    if state.final:
        return
    if state.blocked:
        yield PathEvent(RESUME, state, PathState(state.role, state.position, state.revisions))
        return
    for role, transition in moves.events:
        if role != state.role:
            continue
        event = transition.event or ""
        if event == TELEPORT and state.revisions >= max_revisions:
            continue
        for agent in agents if event == DELEGATE else (None,):
            position = 1 if event in STARTS else state.position + (event in ADVANCES)
            target, taken = moves.settle(transition, position, tasks)
            revisions = state.revisions + (event in REVISES)
            after = (
                PathState(target)  # one end, however the step got there
                if target in FINAL
                else PathState(target, position, revisions, False, agent)
            )
            yield PathEvent(event, state, after, agent, tuple(taken))
    if state.role == "work":
        yield PathEvent(BLOCK, state, PathState("work", state.position, state.revisions, True))


def _explore(
    start: PathState, leaving: Callable[[PathState], Iterable[PathEvent]]
) -> tuple[tuple[PathState, ...], tuple[PathEvent, ...]]:
    """Every state reachable from `start` and every transition between them, breadth first."""
    seen = {start: None}
    queue = deque([start])
    events = []
    while queue:
        state = queue.popleft()
        for event in leaving(state):
            events.append(event)
            if event.target not in seen:
                seen[event.target] = None
                queue.append(event.target)
    return tuple(seen), tuple(events)


def _paths(step_id: str, start: PathState, events: tuple[PathEvent, ...]) -> Iterator[StepPath]:
    """For each transition, the shortest path through it from the start to the end."""
    to_reach = _reaching(start, events)
    onward = _onward(events)
    found: set[tuple[PathEvent, ...]] = set()
    number = 0
    for event in events:
        path = (*_back(to_reach, event.source), event, *_forth(onward, event.target))
        if path not in found:
            found.add(path)
            number += 1
            yield StepPath(f"{step_id}-{number}", step_id, event, path)


def _reaching(start: PathState, events: Iterable[PathEvent]) -> dict[PathState, PathEvent | None]:
    """Each state's last event on a shortest path from the start (breadth first, in order)."""
    leaving: dict[PathState, list[PathEvent]] = {}
    for event in events:
        leaving.setdefault(event.source, []).append(event)
    parent: dict[PathState, PathEvent | None] = {start: None}
    queue = deque([start])
    while queue:
        for event in leaving.get(queue.popleft(), []):
            if event.target not in parent:
                parent[event.target] = event
                queue.append(event.target)
    return parent


def _back(parent: Mapping[PathState, PathEvent | None], state: PathState) -> list[PathEvent]:
    path = []
    step = parent[state]
    while step is not None:
        path.append(step)
        step = parent[step.source]
    return path[::-1]


def _onward(events: Iterable[PathEvent]) -> dict[PathState, PathEvent]:
    """Each state's first event on a shortest way on to the end (the first such, in order)."""
    events = list(events)
    arriving: dict[PathState, list[PathEvent]] = {}
    for event in events:
        arriving.setdefault(event.target, []).append(event)
    distance = {s: 0 for e in events for s in (e.source, e.target) if s.final}
    queue = deque(distance)
    while queue:
        state = queue.popleft()
        for event in arriving.get(state, []):
            if event.source not in distance:
                distance[event.source] = distance[state] + 1
                queue.append(event.source)
    return {
        e.source: e
        for e in reversed(events)  # the first in order wins
        if e.source in distance and distance.get(e.target) == distance[e.source] - 1
    }


def _forth(onward: Mapping[PathState, PathEvent], state: PathState) -> list[PathEvent]:
    path = []
    while not state.final:
        step = onward[state]
        path.append(step)
        state = step.target
    return path


# -- as text and data ----------------------------------------------------------------------


def text(paths: FlowPaths, graphs: Iterable[StepGraph]) -> str:
    graphs = list(graphs)
    lines = []
    for graph in graphs:
        agents = f"; delegates to {', '.join(graph.agents)}" if graph.agents else ""
        lines.append(
            f"step {graph.step_id} ({graph.kind}, {_tasks(graph)}{agents}): {len(graph.states)} states, "
            f"{len(graph.events)} transitions, {len(graph.paths)} paths"
        )
        lines += [f"  {p.id}: {', '.join(e.label for e in p.events)}" for p in graph.paths]
    if len(graphs) == len(paths.graphs):
        total = len(paths.machine.transitions)
        covered = len(paths.covered() & set(paths.machine.transitions))
        lines.append(f"transitions of the machine {paths.machine.class_name} on a path: {covered} of {total}")
    return "\n".join(lines) + "\n"


def _tasks(graph: StepGraph) -> str:
    count = f"{graph.tasks} task{'s' if graph.tasks != 1 else ''}"
    where = {
        "ready": "of its ready checklist",
        "fast path": "one per route, as its fast path plans them",
        "composed": "composed at intake",
        "the step": "the step itself",
    }[graph.checklist]
    return f"{count} {where}"


def to_json(paths: FlowPaths, graphs: Iterable[StepGraph]) -> dict[str, Any]:
    graphs = list(graphs)
    out: dict[str, Any] = {
        "workflow": paths.workflow_id,
        "max_revisions": paths.max_revisions,
        "steps": [_graph_json(g) for g in graphs],
    }
    if len(graphs) == len(paths.graphs):
        transitions = paths.machine.transitions
        covered = paths.covered()
        out["machine"] = {
            "class": paths.machine.class_name,
            "transitions": len(transitions),
            "covered": sum(t in covered for t in transitions),
        }
    return out


def _graph_json(graph: StepGraph) -> dict[str, Any]:
    return {
        "step": graph.step_id,
        "kind": graph.kind,
        "tasks": graph.tasks,
        "checklist": graph.checklist,
        "agents": list(graph.agents),
        "states": [s.label for s in graph.states],
        "transitions": [_event_json(e) for e in graph.events],
        "paths": [
            {"id": p.id, "goal": p.goal.label, "events": [_event_json(e) for e in p.events]}
            for p in graph.paths
        ],
    }


def _event_json(event: PathEvent) -> dict[str, Any]:
    return {
        "event": event.event,
        "label": event.label,
        "from": event.source.label,
        "to": event.target.label,
        "machine": [
            {"source": t.source, "event": t.event, "cond": t.cond, "target": t.target}
            for t in event.transitions
        ],
    }
