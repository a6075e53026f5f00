"""The run card: Checklist -> Prepare -> Work, as terminal text, JSON, or an SVG image.

Display only: the card reads the state and the progress values, and nothing reads
the card. `Task N/M` shows the full current action; `Revise checklist` the revision.
"""

from __future__ import annotations

import textwrap
from html import escape
from typing import Any

from .directive import Directive


def card_data(directive: Directive) -> dict[str, Any]:
    state, step = directive.state, directive.step
    done = min(state.position - 1, state.total) if state.node != "intake" else 0
    task = directive.task
    return {
        "process_id": directive.process_id,
        "workflow": directive.workflow,
        "step": {"id": step.id, "title": step.title, "kind": step.kind} if step else None,
        "completed_steps": list(state.completed_steps),
        "status": "complete" if directive.completed else "running",
        "checklist": {
            "summary": state.progress.checklist,
            "total": state.total,
            "done": done,
            "results": list(state.progress.results),
        },
        "prepare": {
            "length": state.total,
            "cursor": state.position,
            "action": task.action if task else None,
            "expected_result": task.expected_result if task else None,
        },
        "work": {
            "role": directive.role,
            "action": task.action if task else None,
            "outcome": state.progress.work,
        },
    }


def card_text(directive: Directive, width: int = 78) -> str:
    data = card_data(directive)
    step = data["step"]
    title = f"{directive.workflow.get('title', '')} — {directive.process_id}"
    lines = [title, "=" * min(width, len(title))]
    if step is None:
        lines.append(f"Complete: {len(data['completed_steps'])} steps done; result {{}}")
        return "\n".join(lines) + "\n"
    lines.append(f"Step: {step['id']} — {step['title']} ({step['kind']})")
    checklist = data["checklist"]
    lines.append(
        f"[Checklist] {checklist['done']}/{checklist['total']} done"
        + (f" — {checklist['summary']}" if checklist["summary"] else "")
    )
    for index, result in enumerate(checklist["results"][: checklist["done"]], start=1):
        lines.append(f"    {index}. {result}")
    prepare = data["prepare"]
    if prepare["action"]:
        lines.append(
            f"[Prepare]   task {prepare['cursor']} of {prepare['length']}; "
            f"expected: {prepare['expected_result']}"
        )
    else:
        lines.append(
            f"[Prepare]   {prepare['length']} tasks" if prepare["length"] else "[Prepare]   no checklist yet"
        )
    work = data["work"]
    lines.append(f"[Work]      {work['role']}" + (f": {work['action']}" if work["action"] else ""))
    if work["outcome"]:
        lines.append(f"            last result: {work['outcome']}")
    return "\n".join(textwrap.shorten(line, 2000) if len(line) > 2000 else line for line in lines) + "\n"


def card_svg(directive: Directive) -> str:
    """The run card as an SVG image: three blocks side by side, Checklist -> Prepare -> Work."""
    data = card_data(directive)
    step = data["step"]
    checklist, prepare, work = data["checklist"], data["prepare"], data["work"]
    blocks = [
        ("Checklist", [f"{checklist['done']}/{checklist['total']} done", checklist["summary"] or ""]),
        (
            "Prepare",
            [
                f"task {prepare['cursor']} of {prepare['length']}",
                f"expected: {prepare['expected_result'] or '—'}",
            ]
            if prepare["action"]
            else [f"{prepare['length']} tasks" if prepare["length"] else "no checklist yet"],
        ),
        ("Work", [work["role"], work["action"] or "", f"last: {work['outcome']}" if work["outcome"] else ""]),
    ]
    box_w, box_h, gap, top = 300, 170, 40, 70
    width = 3 * box_w + 2 * gap + 40
    heading = f"{directive.workflow.get('title', '')} — {step['id'] if step else 'complete'}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + box_h + 30}" '
        f'viewBox="0 0 {width} {top + box_h + 30}" font-family="Helvetica, Arial, sans-serif">',
        f'<rect width="{width}" height="{top + box_h + 30}" fill="#ffffff"/>',
        f'<text x="20" y="32" font-size="20" font-weight="bold">{escape(heading)}</text>',
        f'<text x="20" y="54" font-size="12" fill="#666666">{escape(directive.process_id)}</text>',
    ]
    for index, (name, lines) in enumerate(blocks):
        x = 20 + index * (box_w + gap)
        current = name == "Work" and not directive.completed
        fill, stroke = ("#f3e8ff", "#7c3aed") if current else ("#f8fafc", "#94a3b8")
        parts.append(
            f'<rect x="{x}" y="{top}" width="{box_w}" height="{box_h}" rx="10" '
            f'fill="{fill}" stroke="{stroke}"/>'
        )
        parts.append(f'<text x="{x + 14}" y="{top + 26}" font-size="15" font-weight="bold">{name}</text>')
        y = top + 50
        for line in lines:
            for wrapped in textwrap.wrap(line, 38)[:3]:
                parts.append(f'<text x="{x + 14}" y="{y}" font-size="12">{escape(wrapped)}</text>')
                y += 17
        if index < 2:
            ax = x + box_w + 6
            parts.append(
                f'<path d="M{ax} {top + box_h / 2} L{ax + gap - 12} {top + box_h / 2}" stroke="#475569" '
                f'stroke-width="2" marker-end="url(#arrow)"/>'
            )
    parts.insert(
        1,
        '<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="6" refY="3" orient="auto">'
        '<path d="M0,0 L0,6 L7,3 z" fill="#475569"/></marker></defs>',
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
