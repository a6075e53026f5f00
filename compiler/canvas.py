"""The plan canvas: the workflow as its platform draws it, one model and a renderer per format.

`plan_canvas` turns the `CheckedWorkflow` into a neutral `Canvas`: every top-level step
in `next_step_id` order (numbered in that order), each route's sub-agent step after its
parent (no number), `end`, then the steps that never run. Mermaid and dot are rendered
here; svg and html (our own layout, no external program) in `compiler.canvas_svg`.
Every renderer is deterministic: ids come from the plan, never from Python objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, TypeAlias

from todoflow.dsl.nodes import node

from .diagrams import dot_string, markdown_text, mermaid_text
from .model import CheckedStep, CheckedWorkflow, LlmChoice

NodeKind: TypeAlias = Literal["regular", "todo_task", "end"]
END_ID = "workflow_end"  # `end` ends a subgraph in Mermaid


@node
class CanvasNode:
    id: str  # the diagram id: `s<k>_<step>` (k: place in the plan, sub-agents included)
    kind: NodeKind
    title: str
    step_id: str | None = None  # None for the end
    number: int | None = None  # run order of a top-level step that runs; None otherwise
    parent: str | None = None  # a sub-agent's: the node whose route reaches it
    runs: bool = True  # False: a top-level step that no step continues with
    next_step_id: str | None = None  # shown on a step that never runs
    routes: int = 0
    generic_agent: bool = False
    tasks: int | None = None  # the ready checklist's size; None: composed at run time
    needs: tuple[str, ...] = ()
    output: str | None = None
    mode: str | None = None  # `learn_code`: the fast path first
    llm: str | None = None  # the step's execution LLM, `provider:model`, defaults applied
    conditional_llm: str | None = None
    max_turns: int | None = None  # a todo_task step's bound on orchestrator turns

    @property
    def sub_agent(self) -> bool:
        return self.parent is not None


@node
class CanvasEdge:
    source: str
    target: str
    kind: Literal["next", "route"]
    name: str | None = None  # a route's name
    condition: str | None = None  # a route's condition


@node
class Canvas:
    title: str
    nodes: tuple[CanvasNode, ...]  # the order the renderers place them in
    edges: tuple[CanvasEdge, ...]

    def node(self, node_id: str) -> CanvasNode:
        return next(n for n in self.nodes if n.id == node_id)


def plan_canvas(workflow: CheckedWorkflow) -> Canvas:
    ids = {s.id: f"s{k}_{re.sub(r'[^A-Za-z0-9]', '_', s.id)}" for k, s in enumerate(workflow.all_steps(), 1)}
    nodes: list[CanvasNode] = []
    edges: list[CanvasEdge] = []

    def add(step: CheckedStep, number: int | None, parent: str | None, runs: bool) -> None:
        nodes.append(_node(step, ids[step.id], number, parent, runs))
        for route in step.routes:
            edges.append(CanvasEdge(ids[step.id], ids[route.step.id], "route", route.name, route.condition))
            add(route.step, None, ids[step.id], runs)

    for number, step_id in enumerate(workflow.reachable, 1):
        step = workflow.step(step_id)
        add(step, number, None, True)
        following = step.next_step_id
        edges.append(
            CanvasEdge(ids[step.id], END_ID if following in (None, "end") else ids[following], "next")
        )
    nodes.append(CanvasNode(END_ID, "end", "End"))
    for step in workflow.steps:
        if step.id not in workflow.reachable:
            add(step, None, None, False)
    return Canvas(workflow.title, tuple(nodes), tuple(edges))


def _node(step: CheckedStep, node_id: str, number: int | None, parent: str | None, runs: bool) -> CanvasNode:
    return CanvasNode(
        id=node_id,
        kind=step.kind,
        title=step.title,
        step_id=step.id,
        number=number,
        parent=parent,
        runs=runs,
        next_step_id=None if runs or parent else step.next_step_id,
        routes=len(step.routes),
        generic_agent=step.generic_agent,
        tasks=len(step.tasks) if step.tasks is not None else None,
        needs=step.context_dependencies,
        output=step.context_output,
        mode=step.declared_execution_mode,
        llm=_llm(step.agent_configs.execution_llm),
        conditional_llm=_llm(step.agent_configs.conditional_llm),
        max_turns=step.agent_configs.execution_max_turns if step.kind == "todo_task" else None,
    )


def _llm(choice: LlmChoice | None) -> str | None:
    return None if choice is None else f"{choice.provider}:{choice.model_id}"


def facts(item: CanvasNode) -> list[str]:
    """The lines every format shows under a node's title, in one wording."""
    lines = []
    if item.kind == "todo_task":
        routes = f"{item.routes} route{'s' if item.routes != 1 else ''}"
        lines.append(f"{routes} · generic agent {'on' if item.generic_agent else 'off'}")
        lines.append(
            "checklist composed at run time" if item.tasks is None else f"checklist: {item.tasks} tasks"
        )
    if item.mode:
        lines.append(f"mode {item.mode}")
    if item.llm:
        lines.append(f"llm {item.llm}")
    if item.conditional_llm:
        lines.append(f"conditional_llm {item.conditional_llm}")
    if item.max_turns is not None:
        lines.append(f"max_turns {item.max_turns}")
    if item.needs:
        lines.append("in: " + ", ".join(item.needs))
    if item.output:
        lines.append("out: " + item.output)
    if not item.runs:
        lines.append(f"never runs (next: {item.next_step_id or 'end'})")
    return lines


def badge(item: CanvasNode) -> str:
    """`1 · todo_task`, `sub-agent · regular`: what a node is, before its title."""
    if item.kind == "end":
        return ""
    where = str(item.number) if item.number is not None else "sub-agent" if item.sub_agent else "not run"
    return f"{where} · {item.kind}"


def edge_label(edge: CanvasEdge) -> str:
    return f"{edge.name}: {edge.condition}" if edge.kind == "route" else ""


# -- Mermaid and dot ---------------------------------------------------------------------

STYLES = {  # fill, stroke, text; shared by every format so they look alike
    "todo_task": ("#f3e8ff", "#7c3aed", "#3b0764"),
    "regular": ("#f8fafc", "#64748b", "#0f172a"),
    "sub_agent": ("#ecfeff", "#0891b2", "#164e63"),
    "idle": ("#f1f5f9", "#cbd5e1", "#64748b"),
    "finish": ("#e2e8f0", "#475569", "#0f172a"),  # not `end`: a keyword in Mermaid
}


def style_of(item: CanvasNode) -> str:
    if item.kind == "end":
        return "finish"
    if not item.runs:
        return "idle"
    return "sub_agent" if item.sub_agent else item.kind


def mermaid(canvas: Canvas, direction: str = "LR") -> str:
    lines = ["flowchart " + direction]
    for name, (fill, stroke, color) in STYLES.items():
        dash = ",stroke-dasharray:6 4" if name in ("sub_agent", "idle") else ""
        lines.append(f"    classDef {name} fill:{fill},stroke:{stroke},color:{color}{dash}")
    for item in canvas.nodes:
        if item.kind == "end":
            lines.append(f'    {item.id}(("{mermaid_text(item.title)}"))')
            continue
        icon = "#9776; " if item.kind == "todo_task" else ""
        text = [icon + mermaid_text(badge(item)), f"<b>{mermaid_text(item.title)}</b>"]
        text += [mermaid_text(line) for line in [f"id: {item.step_id}", *facts(item)]]
        lines.append(f'    {item.id}("{"<br>".join(text)}")')
    for edge in canvas.edges:
        if edge.kind == "route":
            lines.append(f'    {edge.source} -. "{mermaid_text(edge_label(edge))}" .-> {edge.target}')
        else:
            lines.append(f"    {edge.source} --> {edge.target}")
    for name in STYLES:
        members = [n.id for n in canvas.nodes if style_of(n) == name]
        if members:
            lines.append(f"    class {','.join(members)} {name}")
    return "\n".join(lines) + "\n"


def dot(canvas: Canvas, direction: str = "LR") -> str:
    lines = [
        f"digraph {dot_string(canvas.title)} {{",
        f"    rankdir={direction};",
        '    graph [fontname="Helvetica"];',
        '    node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for item in canvas.nodes:
        fill, stroke, color = STYLES[style_of(item)]
        colors = f'fillcolor="{fill}", color="{stroke}", fontcolor="{color}"'
        if item.kind == "end":
            lines.append(f"    {item.id} [label={dot_string(item.title)}, shape=doublecircle, {colors}];")
            continue
        icon = "☰ " if item.kind == "todo_task" else ""
        text = [icon + badge(item), item.title, f"id: {item.step_id}", *facts(item)]
        dashed = ', style="rounded,filled,dashed"' if style_of(item) in ("sub_agent", "idle") else ""
        lines.append(f"    {item.id} [label={_dot_left(text)}, {colors}{dashed}];")
    for edge in canvas.edges:
        if edge.kind == "route":
            lines.append(
                f"    {edge.source} -> {edge.target} [label={dot_string(edge_label(edge))}, style=dashed];"
            )
        else:
            lines.append(f"    {edge.source} -> {edge.target};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_left(lines: list[str]) -> str:
    """A dot label of left-aligned lines (each ends in `\\l`), special characters escaped."""
    return dot_string("".join(line + "\n" for line in lines), newline="\\l")


def markdown(canvas: Canvas, direction: str = "LR") -> str:
    """A Markdown section: the canvas as a Mermaid diagram."""
    return f"### {markdown_text(canvas.title)}\n\n```mermaid\n{mermaid(canvas, direction)}```\n"


def renderers() -> dict[str, Callable[[Canvas, str], str]]:
    from .canvas_svg import html, svg

    return {"mermaid": mermaid, "md": markdown, "dot": dot, "svg": svg, "html": html}
