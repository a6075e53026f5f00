"""Diagrams of a `Machine`: one graph model, one renderer per format.

Mermaid (`.mmd`), a Markdown transition table, Graphviz dot and SVG (through the
`dot` program). Every renderer is deterministic: ids come from the machine, never
from Python objects, so snapshots of diagrams are stable.
"""

from __future__ import annotations

import re
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


# Kept as they are in Mermaid text; every other character is written as an entity code
# (`#60;`), which Mermaid turns into an HTML entity: nothing in a title can end a label,
# start a comment (`%%`), or be taken for markup (`<ship>` would be dropped).
_MERMAID_PLAIN = re.compile(r"[\w ,.:()/?!'@+=*-]")


def mermaid_text(text: str) -> str:
    """`text` as a Mermaid label: special characters as entity codes, newlines as `<br>`."""
    return "".join(c if _MERMAID_PLAIN.fullmatch(c) else "<br>" if c == "\n" else f"#{ord(c)};" for c in text)


def mermaid(machine: Machine, direction: str = "LR") -> str:
    lines = ["stateDiagram-v2", f"    direction {direction}"]
    inner = {c.id for s in machine.all_states() for c in s.children}
    owner = {c.id: s.id for s in machine.all_states() for c in s.children}
    inside: dict[str, list[MachineTransition]] = {}  # compound id -> its children's transitions
    for transition in machine.transitions:
        if transition.source in owner:
            inside.setdefault(owner[transition.source], []).append(transition)

    def emit(state: MachineState, depth: int) -> None:
        pad = "    " * depth
        label = mermaid_text(state.name)
        if not state.children:
            lines.append(f'{pad}state "{label}" as {state.id}')
            return
        lines.append(f'{pad}state "{label}" as {state.id} {{')
        lines.append(f"{pad}    direction {direction}")
        initial = next(c for c in state.children if c.initial)
        lines.append(f"{pad}    [*] --> {initial.id}")
        for child in state.children:
            emit(child, depth + 1)
        for transition in inside.get(state.id, []):
            label = _mermaid_label(transition)
            lines.append(f"{pad}    {transition.source} --> {transition.target} : {label}")
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
            lines.append(f"    {transition.source} --> {transition.target} : {_mermaid_label(transition)}")
    for state in machine.states:
        if state.final:
            lines.append(f"    {state.id} --> [*]")
    return "\n".join(lines) + "\n"


def _mermaid_label(transition: MachineTransition) -> str:
    return mermaid_text(_label(transition))


def markdown(machine: Machine, direction: str = "LR") -> str:
    """A Markdown section: the Mermaid diagram (in `direction`), then every transition."""
    names = {s.id: _qualified(s) for s in machine.all_states()}
    lines = [
        f"### {markdown_text(machine.title)}",
        "",
        "```mermaid",
        mermaid(machine, direction).rstrip("\n"),
        "```",
        "",
        "| state | event | guard | target |",
        "|---|---|---|---|",
    ]
    for transition in machine.transitions:
        event = f"`{transition.event}`" if transition.event else "(automatic)"
        guard = f"`{transition.cond}`" if transition.cond else ""
        source, target = markdown_text(names[transition.source]), markdown_text(names[transition.target])
        lines.append(f"| {source} | {event} | {guard} | {target} |")
    return "\n".join(lines) + "\n"


def markdown_text(text: str) -> str:
    """Text in a Markdown table cell or heading: markup characters escaped, one line."""
    escaped = re.sub(r"([\\`*_{}\[\]<>()#+!|~-])", r"\\\1", " ".join(text.split()))
    return escaped.replace("&", "&amp;")


def _qualified(state: MachineState) -> str:
    inner = state.step_id is not None and state.role != "step"
    return f"{state.step_id}: {state.name}" if inner else state.name


def dot(machine: Machine, direction: str = "LR") -> str:
    lines = [
        f'digraph "{machine.class_name}" {{',
        f"    rankdir={direction};",
        "    compound=true;",
        '    graph [fontname="Helvetica"];',  # cluster titles, in the nodes' font
        '    node [shape=box, style="rounded", fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    anchor: dict[str, str] = {}

    def emit(state: MachineState, depth: int) -> None:
        pad = "    " * depth
        label = dot_string(state.name)
        if not state.children:
            shape = ", shape=doublecircle, fontsize=10, margin=0" if state.final and depth == 1 else ""
            lines.append(f'{pad}"{state.id}" [label={label}{shape}];')
            anchor[state.id] = state.id
            return
        lines.append(f'{pad}subgraph "cluster_{state.id}" {{')
        lines.append(f"{pad}    label={label};")
        for child in state.children:
            emit(child, depth + 1)
        initial = next(c for c in state.children if c.initial)
        anchor[state.id] = initial.id
        if not (state.initial and depth == 1):  # the workflow's own start arrow marks that one
            # arrows into the step end at its start point: ranked before the initial state,
            # the cluster is laid out after the one the arrow comes from
            anchor[state.id] = f"{state.id}__start"
            lines.append(f'{pad}    "{anchor[state.id]}" [shape=point, width=0.15];')
            lines.append(f'{pad}    "{anchor[state.id]}" -> "{initial.id}";')
        lines.append(f"{pad}}}")

    lines.append('    "__start" [shape=point, width=0.2];')
    for state in machine.states:
        emit(state, 1)
    lines.append(f'    "__start" -> "{anchor[next(s.id for s in machine.states if s.initial)]}";')
    by_id = {s.id: s for s in machine.all_states()}
    for transition in machine.transitions:
        source, target = by_id[transition.source], by_id[transition.target]
        attributes = [f"label={dot_string(_label(transition))}"]
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


def dot_string(text: str, newline: str = "\\n") -> str:
    """A quoted dot string; `newline` is what a line break becomes (`\\l`: left-aligned)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", newline) + '"'


RENDERERS: dict[str, Callable[[Machine, str], str]] = {
    "mermaid": mermaid,
    "md": markdown,
    "dot": dot,
    "svg": svg,
}
