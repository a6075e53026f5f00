"""The checklist machine: the checked workflow as a statechart, data first, code second.

Each top-level step that can run is a compound state; a `todo_task` step holds
intake -> cursor -> work (<-> cursor), with `revise` reached only by the
`teleport_revise_tasks` event, and a final `end`; a `regular` step holds work ->
done. Steps are chained by `next_step_id` through their `done.state` events, and
the workflow ends in the top-level final state `end`. Guards (`has_task`,
`past_end`) are names resolved on the runtime's model: the machine has no logic.

From the one `Machine` value come the live python-statemachine class, the generated
Python module and (in `compiler.diagrams`) every diagram. State ids are `s<n>_<step>`
(n: the step's place in the source), so they are valid Python names, never collide
across steps, and never equal an event name; a child's id is `<prefix>_<role>`, but the
final `end` child is `<prefix>_complete`. The runtime reads roles, never ids.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from todoflow.dsl.nodes import node

from .model import CheckedStep, CheckedWorkflow, StepKind

END = "end"


@node
class MachineState:
    id: str
    name: str
    step_id: str | None = None
    role: str = ""  # intake, cursor, work, revise, end, done; "step" for a compound
    initial: bool = False
    final: bool = False
    children: tuple[MachineState, ...] = ()


@node
class MachineTransition:
    source: str
    target: str
    event: str | None  # None: automatic (eventless), taken when `cond` holds
    cond: str | None = None


@node
class Machine:
    class_name: str
    title: str
    states: tuple[MachineState, ...]
    transitions: tuple[MachineTransition, ...]

    def all_states(self) -> tuple[MachineState, ...]:
        return tuple(_flatten(self.states))


def _flatten(states: Iterable[MachineState]) -> Iterable[MachineState]:
    for state in states:
        yield state
        yield from _flatten(state.children)


def class_name(workflow_id: str) -> str:
    words = re.split(r"[-_]+", workflow_id)
    return "".join(w[:1].upper() + w[1:] for w in words if w) + "Workflow"


def state_prefix(index: int, step_id: str) -> str:
    return f"s{index}_{step_id.replace('-', '_')}"


def workflow_machine(workflow: CheckedWorkflow) -> Machine:
    """The statechart of the steps that can run, chained by `next_step_id`."""
    prefixes = {s.id: state_prefix(i, s.id) for i, s in enumerate(workflow.steps, start=1)}
    reachable = set(workflow.reachable)
    runnable = [s for s in workflow.steps if s.id in reachable]
    states: list[MachineState] = []
    transitions: list[MachineTransition] = []
    for position, step in enumerate(runnable):
        prefix = prefixes[step.id]
        children, inner = _step_states(step, prefix)
        states.append(
            MachineState(prefix, f"{step.id}: {step.title}", step.id, "step", position == 0, False, children)
        )
        transitions += inner
        target = prefixes.get(step.next_step_id or END, END)
        transitions.append(MachineTransition(prefix, target, f"done_state_{prefix}"))
    states.append(MachineState(END, "End", None, "end", not runnable, True))
    return Machine(class_name(workflow.id), workflow.title, tuple(states), tuple(transitions))


def step_machine(step: CheckedStep) -> Machine:
    """One step's own machine, for `todoflow graph --step` (sub-agent steps too)."""
    children, transitions = _step_states(step, state_prefix(1, step.id))
    return Machine(class_name(step.id) + "Step", step.title, children, tuple(transitions))


def _step_states(step: CheckedStep, prefix: str) -> tuple[tuple[MachineState, ...], list[MachineTransition]]:
    return checklist(step.kind, step.id, prefix)


# Mermaid names the pseudo-states of a compound `<parent>_start` and `<parent>_end`: a
# child called `<prefix>_end` would be merged with its parent's end marker (drawn as a
# self-loop), in our diagrams and in python-statemachine's own.
_ID_SUFFIX = {"end": "complete"}


def checklist(
    kind: StepKind, step_id: str, prefix: str
) -> tuple[tuple[MachineState, ...], list[MachineTransition]]:
    """The states and transitions of one step of `kind`, their ids prefixed by `prefix`."""

    def state(role: str, name: str, initial: bool = False, final: bool = False) -> MachineState:
        return MachineState(f"{prefix}_{_ID_SUFFIX.get(role, role)}", name, step_id, role, initial, final)

    if kind == "regular":
        work, done = state("work", "Work", initial=True), state("done", "Done", final=True)
        return (work, done), [MachineTransition(work.id, done.id, "confirm")]
    intake, cursor = state("intake", "Intake", initial=True), state("cursor", "Cursor")
    work, revise, end = state("work", "Work"), state("revise", "Revise"), state("end", "Done", final=True)
    delegated = state("delegated", "Delegated")
    return (intake, cursor, work, delegated, revise, end), [
        MachineTransition(intake.id, cursor.id, "submit_tasks"),
        MachineTransition(cursor.id, work.id, None, "has_task"),
        MachineTransition(cursor.id, end.id, None, "past_end"),
        MachineTransition(work.id, cursor.id, "confirm"),
        MachineTransition(work.id, delegated.id, "delegate"),
        MachineTransition(delegated.id, cursor.id, "accept_delegation"),
        MachineTransition(delegated.id, work.id, "return_delegation"),
        MachineTransition(work.id, revise.id, "teleport_revise_tasks"),
        MachineTransition(revise.id, cursor.id, "submit_revision"),
    ]


# -- structure checks (the library skips some for machines built from definitions) ----


def structure_problems(machine: Machine) -> list[str]:
    """Every state reachable, no trap state, the end reachable from everywhere."""
    problems = []
    states = {s.id: s for s in machine.all_states()}
    for clash in sorted({t.event for t in machine.transitions if t.event} & set(states)):
        problems.append(f"event `{clash}` has the same name as a state")
    forward = _edges(machine, states)
    start = _enter(next(s for s in machine.states if s.initial))
    reached = _closure([start], forward)
    atomic = {s.id for s in states.values() if not s.children}
    for missing in sorted(atomic - reached):
        problems.append(f"state `{missing}` is unreachable")
    for state in sorted(atomic):
        if not states[state].final and not forward.get(state):
            problems.append(f"state `{state}` is a trap: no transition leaves it")
    backward: dict[str, set[str]] = {}
    for source, targets in forward.items():
        for target in targets:
            backward.setdefault(target, set()).add(source)
    finishing = _closure([END], backward)
    for state in sorted(atomic - finishing):
        problems.append(f"state `{state}` has no path to `{END}`")
    return problems


def _enter(state: MachineState) -> str:
    while state.children:
        state = next(c for c in state.children if c.initial)
    return state.id


def _edges(machine: Machine, states: dict[str, MachineState]) -> dict[str, set[str]]:
    """Edges between atomic states; a final child leads on through its parent's done event."""
    parent = {c.id: s.id for s in states.values() for c in s.children}
    edges: dict[str, set[str]] = {}
    for transition in machine.transitions:
        target = _enter(states[transition.target])
        sources = (
            [transition.source]
            if not states[transition.source].children
            else [c.id for c in states[transition.source].children if c.final]
        )
        for source in sources:
            edges.setdefault(source, set()).add(target)
    leaving = {t.source for t in machine.transitions}
    for child, owner in parent.items():
        if states[child].final and owner not in leaving:
            edges.setdefault(child, set())
    return edges


def _closure(start: list[str], edges: dict[str, set[str]]) -> set[str]:
    seen = set(start)
    stack = list(start)
    while stack:
        for following in edges.get(stack.pop(), ()):
            if following not in seen:
                seen.add(following)
                stack.append(following)
    return seen


# -- the live class and the generated module -------------------------------------------


def definition(machine: Machine) -> dict[str, Any]:
    """The `states` mapping for `statemachine.io.create_machine_class_from_definition`."""
    by_source: dict[str, list[MachineTransition]] = {}
    for transition in machine.transitions:
        by_source.setdefault(transition.source, []).append(transition)

    def build(state: MachineState) -> dict[str, Any]:
        out: dict[str, Any] = {"name": state.name}
        if state.initial:
            out["initial"] = True
        if state.final:
            out["final"] = True
        if state.children:
            out["states"] = {c.id: build(c) for c in state.children}
        events: dict[str, list[dict[str, str]]] = {}
        automatic = []
        for transition in by_source.get(state.id, []):
            entry = {"target": transition.target} | ({"cond": transition.cond} if transition.cond else {})
            if transition.event is None:
                automatic.append(entry)
            else:
                events.setdefault(transition.event, []).append(entry)
        if events:
            out["on"] = events
        if automatic:
            out["transitions"] = automatic
        return out

    return {state.id: build(state) for state in machine.states}


def machine_class(machine: Machine) -> Any:
    """The live python-statemachine class (a `StateChart` subclass)."""
    from statemachine.io import create_machine_class_from_definition

    # the factory consumes the mapping it is given
    return create_machine_class_from_definition(machine.class_name, states=copy.deepcopy(definition(machine)))


def module_source(machine: Machine, source_path: str, source_sha256: str) -> str:
    """Readable Python: one StateChart subclass, states and transitions in source order."""
    lines = [
        f"# Generated by todoflow from {_line(source_path)} - do not edit; recompile instead.",
        f"# Workflow: {_line(machine.title)}",
        f"# source_sha256: {source_sha256}",
        '"""The checklist machine of a todoflow workflow.',
        "",
        "Guards (`has_task`, `past_end`) are resolved on the model the runtime passes in;",
        "this module holds the graph and no logic.",
        '"""',
        "",
        "from statemachine import State, StateChart",
        "",
        "",
        f"class {machine.class_name}(StateChart):",
        f"    {_string(machine.title)}",
        "",
    ]
    owner = {c.id: s.id for s in machine.states for c in s.children}
    inside: dict[str, list[MachineTransition]] = {}  # compound id -> its children's transitions
    for transition in machine.transitions:
        if transition.source in owner:
            inside.setdefault(owner[transition.source], []).append(transition)
    for state in machine.states:
        if state.children:
            lines += _compound(state, inside.get(state.id, []))
    lines += [f"    {END} = State({_string('End')}, final=True)", ""]
    top = {s.id for s in machine.states}
    for transition in machine.transitions:
        if transition.source in top:
            lines.append(f"    {transition.event} = {transition.source}.to({transition.target})")
    return "\n".join(lines) + "\n"


def _compound(state: MachineState, transitions: list[MachineTransition]) -> list[str]:
    lines = [f"    class {state.id}(State.Compound, name={_string(state.name)}):"]
    for child in state.children:
        flags = "".join([", initial=True" if child.initial else "", ", final=True" if child.final else ""])
        lines.append(f"        {child.id} = State({_string(child.name)}{flags})")
    for transition in transitions:
        call = f"{transition.source}.to({transition.target}" + (
            f", cond={_string(transition.cond)})" if transition.cond else ")"
        )
        lines.append(f"        {transition.event} = {call}" if transition.event else f"        {call}")
    return [*lines, ""]


def _line(text: str) -> str:
    return " ".join(text.split())


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
