"""Diagrams of a `Machine`: one graph model, one renderer per format.

Mermaid (`.mmd`), a Markdown transition table, Graphviz dot and SVG (through the
`dot` program). Every renderer is deterministic: ids come from the machine, never
from Python objects, so snapshots of diagrams are stable.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from todoflow.dsl.diagnostics import TodoflowError

from .machine import Machine, MachineState, MachineTransition

DIRECTIONS = ("LR", "TB")


class DiagramError(TodoflowError):
    """A diagram that cannot be made here (no Graphviz for svg)."""


def _label(transition: MachineTransition) -> str:
    if transition.event is None:
        return f"[{transition.cond}]"
    if transition.event.startswith("done_state_"):
        return "next"
    text = transition.event.replace("_", " ")
    return text + (f" [{transition.cond}]" if transition.cond else "")


def mermaid(machine: Machine, direction: str = "LR") -> str:
    lines = ["stateDiagram-v2", f"    direction {direction}"]
    inner = {c.id for s in machine.all_states() for c in s.children}

    def emit(state: MachineState, depth: int) -> None:
        pad = "    " * depth
        label = state.name.replace('"', "'")
        if not state.children:
            lines.append(f'{pad}state "{label}" as {state.id}')
            return
        lines.append(f'{pad}state "{label}" as {state.id} {{')
        initial = next(c for c in state.children if c.initial)
        lines.append(f"{pad}    [*] --> {initial.id}")
        for child in state.children:
            emit(child, depth + 1)
        ids = {c.id for c in state.children}
        for transition in machine.transitions:
            if transition.source in ids:
                lines.append(f"{pad}    {transition.source} --> {transition.target} : {_label(transition)}")
        for child in state.children:
            if child.final:
                lines.append(f"{pad}    {child.id} --> [*]")
        lines.append(f"{pad}}}")

    for state in machine.states:
        emit(state, 1)
    initial = next(s for s in machine.states if s.initial)
    lines.append(f"    [*] --> {initial.id}")
    for transition in machine.transitions:
        if transition.source not in inner:
            lines.append(f"    {transition.source} --> {transition.target} : {_label(transition)}")
    for state in machine.states:
        if state.final:
            lines.append(f"    {state.id} --> [*]")
    return "\n".join(lines) + "\n"


def markdown(machine: Machine, direction: str = "LR") -> str:
    names = {s.id: _qualified(s) for s in machine.all_states()}
    lines = [
        f"### {machine.title}",
        "",
        "| state | event | guard | target |",
        "|---|---|---|---|",
    ]
    for transition in machine.transitions:
        event = f"`{transition.event}`" if transition.event else "(automatic)"
        guard = f"`{transition.cond}`" if transition.cond else ""
        lines.append(f"| {names[transition.source]} | {event} | {guard} | {names[transition.target]} |")
    return "\n".join(lines) + "\n"


def _qualified(state: MachineState) -> str:
    inner = state.step_id is not None and state.role != "step"
    return f"{state.step_id}: {state.name}" if inner else state.name


def dot(machine: Machine, direction: str = "LR") -> str:
    lines = [
        f'digraph "{machine.class_name}" {{',
        f"    rankdir={direction};",
        "    compound=true;",
        '    node [shape=box, style="rounded", fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    anchor: dict[str, str] = {}

    def emit(state: MachineState, depth: int) -> None:
        pad = "    " * depth
        label = _dot_string(state.name)
        if not state.children:
            shape = ', shape=doublecircle, width=0.3, label=""' if state.final and depth == 1 else ""
            lines.append(f'{pad}"{state.id}" [label={label}{shape}];')
            anchor[state.id] = state.id
            return
        lines.append(f'{pad}subgraph "cluster_{state.id}" {{')
        lines.append(f"{pad}    label={label};")
        start = f"{state.id}__start"
        lines.append(f'{pad}    "{start}" [shape=point, width=0.15];')
        for child in state.children:
            emit(child, depth + 1)
        initial = next(c for c in state.children if c.initial)
        lines.append(f'{pad}    "{start}" -> "{initial.id}";')
        lines.append(f"{pad}}}")
        anchor[state.id] = initial.id

    lines.append('    "__start" [shape=point, width=0.2];')
    for state in machine.states:
        emit(state, 1)
    lines.append(f'    "__start" -> "{anchor[next(s.id for s in machine.states if s.initial)]}";')
    by_id = {s.id: s for s in machine.all_states()}
    for transition in machine.transitions:
        source, target = by_id[transition.source], by_id[transition.target]
        attributes = [f"label={_dot_string(_label(transition))}"]
        if source.children:
            attributes.append(f'ltail="cluster_{source.id}"')
        if target.children:
            attributes.append(f'lhead="cluster_{target.id}"')
        tail = next(c.id for c in source.children if c.final) if source.children else source.id
        lines.append(f'    "{tail}" -> "{anchor[target.id]}" [{", ".join(attributes)}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def svg(machine: Machine, direction: str = "LR") -> str:
    program = shutil.which("dot")
    if program is None:
        raise DiagramError(
            "svg needs Graphviz's `dot` program, which is not installed; "
            "it comes with the `graphviz` package (e.g. `apt-get install graphviz`)"
        )
    done = subprocess.run(
        [program, "-Tsvg"], input=dot(machine, direction), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise DiagramError(f"Graphviz's `dot` failed: {done.stderr.strip()}")
    return done.stdout


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


RENDERERS: dict[str, Callable[[Machine, str], str]] = {
    "mermaid": mermaid,
    "md": markdown,
    "dot": dot,
    "svg": svg,
}
