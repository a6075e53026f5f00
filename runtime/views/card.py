"""The run card: Checklist -> Prepare -> Work, as terminal text, JSON, an SVG or a PNG image.

Display only: the card reads the state and the progress values, and nothing reads
the card. The current block is highlighted: Checklist while the list is composed or
received, Work for `Task N/M` (with the full action) and for `Revise checklist`. What
the finished steps were comes from their final todos (`process.final_todos`), so a
complete run shows its last checklist ("5/5 done") and the result `{}`. In the image
every text is wrapped to its box; text that must be shortened ends in an ellipsis and
keeps its full wording in a `<title>` tooltip.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from todoflow.compiler.canvas_text import FONT, LINE_HEIGHT, Lines, shorten, text_block, wrap, xml
from todoflow.dsl.diagnostics import TodoflowError

from ..directive import Directive
from ..plan import RunStep
from ..state import ProcessState
from ..store.base import FinalChecklist

NO_FINISHED: Mapping[str, FinalChecklist] = {}
MARKS = {"done": "✓", "current": "▶", "pending": "○"}
SHOWN_TASKS = 12  # a longer list shows the tasks around the cursor and says how many more


class CardError(TodoflowError):
    """A card image that cannot be made here (no browser for the PNG)."""


def card_data(
    directive: Directive, finished: Mapping[str, FinalChecklist] = NO_FINISHED, status: str | None = None
) -> dict[str, Any]:
    """Every value the card shows; `finished` holds the final todos of finished steps,
    `status` the run's state (`Directive.status`; without it: as if nothing drove it)."""
    state, step = directive.state, directive.step
    task = directive.task
    steps = [_finished_step(step_id, finished.get(step_id)) for step_id in state.completed_steps]
    checklist = _last_checklist(state, steps) if directive.completed else _checklist(state, step)
    return {
        "process_id": directive.process_id,
        "workflow": directive.workflow,
        "step": {"id": step.id, "title": step.title, "kind": step.kind} if step else None,
        "completed_steps": list(state.completed_steps),
        "status": status or directive.status(driven=False),
        "tokens": {"prompt": state.tokens[0], "completion": state.tokens[1]},
        "current": None if directive.completed else "checklist" if state.node == "intake" else "work",
        "checklist": checklist,
        "prepare": {
            "length": state.total if not directive.completed else checklist["total"],
            "cursor": state.position,
            "action": task.action if task else None,
            "expected_result": task.expected_result if task else None,
        },
        "work": {
            "role": directive.role,
            "action": task.action if task else None,
            "outcome": state.progress.work,
        },
        "finished_steps": steps,
        "result": {} if directive.completed else None,
    }


def _last_checklist(state: ProcessState, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A complete run's Checklist block: the last finished step's checklist."""
    last = next((s for s in reversed(steps) if s["total"] is not None), None)
    tasks = last["tasks"] if last else []
    return {
        "summary": state.progress.checklist,
        "total": len(tasks),
        "done": sum(t["state"] == "done" for t in tasks),
        "results": [t["result"] for t in tasks] if last else list(state.progress.results),
        "tasks": tasks,
        "step": last["id"] if last else None,
    }


def _checklist(state: ProcessState, step: RunStep | None) -> dict[str, Any]:
    """The Checklist block of a run in progress: the current step's checklist."""
    done = min(state.position - 1, state.total) if state.node != "intake" else 0
    results = state.progress.results
    return {
        "summary": state.progress.checklist,
        "total": state.total,
        "done": done,
        "results": list(results),
        "tasks": [
            {
                "position": index,
                "action": t.action,
                "state": "done" if index <= done else "current" if index == state.position else "pending",
                "result": results[index - 1] if index <= len(results) and index <= done else None,
                "constraints": list(t.constraints),
            }
            for index, t in enumerate(state.tasks, start=1)
        ],
        "step": step.id if step else None,
    }


def _finished_step(step_id: str, final: FinalChecklist | None) -> dict[str, Any]:
    if final is None:  # a regular step (one confirmation), or todos that could not be read
        return {"id": step_id, "total": None, "done": None, "tasks": []}
    tasks = [
        {
            "position": index,
            "action": todo.title,
            "state": "done" if todo.status == "completed" else "pending",
            "result": todo.result,
            "constraints": list(task.constraints),
        }
        for index, (todo, task) in enumerate(zip(final.todos.todos, final.tasks, strict=True), start=1)
    ]
    return {
        "id": step_id,
        "total": final.todos.summary.total,
        "done": final.todos.summary.completed,
        "tasks": tasks,
    }


def _finished_line(step: Mapping[str, Any]) -> str:
    if step["total"] is None:
        return f"{step['id']}: done"
    return f"{step['id']}: {step['done']}/{step['total']} done"


# -- terminal text ---------------------------------------------------------------------


def card_text(
    directive: Directive, finished: Mapping[str, FinalChecklist] = NO_FINISHED, width: int = 78
) -> str:
    data = card_data(directive, finished)
    step = data["step"]
    title = f"{directive.workflow.get('title', '')} — {directive.process_id}"
    lines = [title, "=" * min(width, len(title))]
    checklist = data["checklist"]
    if step is None:
        lines.append(f"Complete: {_count(len(data['completed_steps']), 'step')} done; result {{}}")
        if checklist["step"] is not None:
            lines.append(f"[Checklist] {checklist['step']}: {checklist['done']}/{checklist['total']} done")
            lines += [
                f"    {t['position']}. {t['action']} — {t['result'] or 'Pending'}" for t in checklist["tasks"]
            ]
        lines += [f"  ✓ {_finished_line(s)}" for s in data["finished_steps"]]
        return "\n".join(lines) + "\n"
    lines.append(f"Step: {step['id']} — {step['title']} ({step['kind']})")
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
    if data["finished_steps"]:
        lines.append("Finished: " + "; ".join(_finished_line(s) for s in data["finished_steps"]))
    return "\n".join(textwrap.shorten(line, 2000) if len(line) > 2000 else line for line in lines) + "\n"


# -- the image -------------------------------------------------------------------------

BOX_W, GAP, SIDE, TOP = 330, 44, 20, 104
PAD = 14
ROOM = BOX_W - 2 * PAD
COLORS = {
    "current": ("#f3e8ff", "#7c3aed"),
    "other": ("#f8fafc", "#94a3b8"),
    "complete": ("#f0fdf4", "#16a34a"),
}


class _Column:
    """One block's text, laid out top-down: each call adds lines and moves the baseline."""

    def __init__(self, x: float) -> None:
        self.x, self.y = x + PAD, 0.0
        self.parts: list[str] = []

    def add(
        self,
        text: str,
        size: float = 12,
        most: int = 1,
        *,
        bold: bool = False,
        color: str = "#0f172a",
        indent: float = 0,
        css: str = "",
    ) -> None:
        lines = wrap(text, ROOM - indent, size, most, bold=bold)
        self.y += size * LINE_HEIGHT
        self.parts.append(
            text_block(self.x + indent, self.y, lines, text, size, bold=bold, color=color, css=css)
        )
        self.y += (len(lines.lines) - 1) * size * LINE_HEIGHT

    def gap(self, amount: float = 6) -> None:
        self.y += amount


def card_svg(directive: Directive, finished: Mapping[str, FinalChecklist] = NO_FINISHED) -> str:
    """The run card as an SVG image: three blocks side by side, Checklist -> Prepare -> Work."""
    data = card_data(directive, finished)
    step, checklist, work = data["step"], data["checklist"], data["work"]
    columns = [_Column(SIDE + index * (BOX_W + GAP)) for index in range(3)]
    _checklist_block(columns[0], checklist)
    _prepare_block(columns[1], data)
    _work_block(columns[2], data)
    box_h = max(48 + c.y + PAD for c in columns)
    total_w = 3 * BOX_W + 2 * GAP + 2 * SIDE
    heading = f"{directive.workflow.get('title', '')}"
    if data["status"] == "complete":
        where = f"complete · {_count(len(data['completed_steps']), 'step')} done · result {{}}"
    else:
        where = f"running · step {step['id']}: {step['title']} ({step['kind']}) · {work['role']}"
    parts = [_header(heading, directive.process_id, where, total_w)]
    for index, (name, column) in enumerate(zip(("Checklist", "Prepare", "Work"), columns, strict=True)):
        parts += _block(index, name, column, data, box_h)
    total_h = TOP + box_h + 20
    finished_part, finished_h = _finished_strip(data["finished_steps"], total_h, total_w)
    parts.append(finished_part)
    total_h += finished_h
    return (
        "\n".join(
            [
                f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h:g}" '
                f'viewBox="0 0 {total_w} {total_h:g}" font-family="{FONT}" class="run-card">',
                f"<title>{xml(heading)} — {xml(directive.process_id)}</title>",
                '<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="6" refY="3" orient="auto">'
                '<path d="M0,0 L0,6 L7,3 z" fill="#475569"/></marker></defs>',
                f'<rect width="{total_w}" height="{total_h:g}" fill="#ffffff"/>',
                *parts,
                "</svg>",
            ]
        )
        + "\n"
    )


def _header(heading: str, process_id: str, where: str, total_w: int) -> str:
    header = [
        text_block(SIDE, 34, wrap(heading, total_w - 2 * SIDE, 20, 1, bold=True), heading, 20, bold=True),
        text_block(SIDE, 56, Lines((process_id,), False), "", 12, color="#64748b"),
        text_block(SIDE, 78, wrap(where, total_w - 2 * SIDE, 13, 1), where, 13, color="#334155", css="where"),
    ]
    return (
        f'<g data-box="header"><rect class="frame" x="{SIDE - 4}" y="10" width="{total_w - 2 * SIDE + 8}" '
        f'height="{TOP - 20}" fill="none"/>' + "".join(header) + "</g>"
    )


def _block(index: int, name: str, column: _Column, data: Mapping[str, Any], box_h: float) -> list[str]:
    """One of the three blocks, and the arrow to the next."""
    x = SIDE + index * (BOX_W + GAP)
    key = name.lower()
    state = "complete" if data["status"] == "complete" else "current" if data["current"] == key else "other"
    fill, stroke = COLORS[state]
    badge = {"current": "current", "complete": "done", "other": ""}[state]
    parts = [
        f'<g class="block {key}{" current" if state == "current" else ""}" data-box="{key}" '
        f'transform="translate(0,{TOP})">'
        f'<rect class="frame" x="{x}" y="0" width="{BOX_W}" height="{box_h:g}" rx="10" fill="{fill}" '
        f'stroke="{stroke}" stroke-width="{2.5 if state == "current" else 1.2}"/>'
        f'<text x="{x + PAD}" y="26" font-size="15" font-weight="bold" font-family="{FONT}" '
        f'fill="#0f172a">{name}</text>'
        + (
            f'<text x="{x + BOX_W - PAD}" y="25" font-size="11" font-family="{FONT}" fill="{stroke}" '
            f'text-anchor="end" font-weight="bold">{badge}</text>'
            if badge
            else ""
        )
        + f'<g transform="translate(0,36)">{"".join(column.parts)}</g></g>'
    ]
    if index < 2:
        ax, ay = x + BOX_W + 6, TOP + box_h / 2
        parts.append(
            f'<path d="M{ax} {ay:g} L{ax + GAP - 14} {ay:g}" stroke="#475569" stroke-width="2" '
            'marker-end="url(#arrow)"/>'
        )
    return parts


def _checklist_block(column: _Column, checklist: Mapping[str, Any]) -> None:
    tasks = checklist["tasks"]
    if not tasks:
        column.add("no checklist yet", 13, color="#64748b")
        return
    where = f" ({checklist['step']})" if checklist["step"] else ""
    column.add(f"{checklist['done']}/{checklist['total']} done{where}", 13, bold=True)
    if checklist["summary"]:
        column.add(checklist["summary"], 12, 3, color="#334155")
    column.gap()
    current = next((t["position"] for t in tasks if t["state"] == "current"), checklist["done"] + 1)
    first = max(0, min(current - 1 - SHOWN_TASKS // 2, len(tasks) - SHOWN_TASKS))
    shown = tasks[first : first + SHOWN_TASKS]
    if first:
        column.add(f"… {first} more before", 11, color="#64748b")
    for task in shown:
        color = "#7c3aed" if task["state"] == "current" else "#0f172a"
        column.add(
            f"{MARKS[task['state']]} {task['position']}. {task['action']}",
            12,
            2,
            color=color,
            bold=task["state"] == "current",
            css=f"task {task['state']}",
        )
        if task["result"]:
            column.add(f"→ {task['result']}", 11, 2, color="#15803d", indent=16, css="result")
    after = len(tasks) - first - len(shown)
    if after:
        column.add(f"… {after} more after", 11, color="#64748b")


def _prepare_block(column: _Column, data: Mapping[str, Any]) -> None:
    prepare = data["prepare"]
    if data["status"] == "complete":
        total = prepare["length"]
        column.add(f"all {_count(total, 'task')} done" if total else "nothing left to prepare", 13, bold=True)
        return
    if prepare["action"]:
        column.add(f"task {prepare['cursor']} of {prepare['length']}", 13, bold=True)
        column.gap()
        column.add("action", 11, color="#64748b")
        column.add(prepare["action"], 12, 6)
        column.gap()
        column.add("expected result", 11, color="#64748b")
        column.add(prepare["expected_result"], 12, 6)
    elif data["work"]["role"] == "Revise checklist":
        column.add(f"{prepare['length']} tasks; the cursor is at task {prepare['cursor']}", 13, bold=True)
    else:
        column.add(f"{prepare['length']} tasks" if prepare["length"] else "no checklist yet", 13, bold=True)


def _work_block(column: _Column, data: Mapping[str, Any]) -> None:
    work = data["work"]
    column.add(
        work["role"], 17, bold=True, color="#3b0764" if data["current"] == "work" else "#0f172a", css="role"
    )
    if data["status"] == "complete":
        column.add("result {}", 13, css="result")
    elif work["role"] == "Revise checklist":
        column.add("the agent sends the corrected list and the task to resume from", 12, 3, color="#334155")
    elif work["action"]:
        column.gap()
        column.add(work["action"], 12, 12, css="action")
    elif data["current"] == "checklist":
        column.add("waiting for the checklist", 12, color="#334155")
    if work["outcome"]:
        column.gap()
        column.add("last result", 11, color="#64748b")
        column.add(work["outcome"], 12, 3, color="#15803d")


def _finished_strip(steps: list[dict[str, Any]], top: float, total_w: float) -> tuple[str, float]:
    if not steps:
        return "", 0
    room = total_w - 2 * SIDE - 2 * PAD
    lines = [f"✓ {_finished_line(s)}" for s in steps]
    texts, y = [], top + 22.0
    texts.append(text_block(SIDE + PAD, y, Lines(("Finished steps",), False), "", 13, bold=True))
    for line in lines:
        y += 12 * LINE_HEIGHT
        texts.append(
            text_block(SIDE + PAD, y, Lines((shorten(line, room, 12),), False), line, 12, css="finished-step")
        )
    height = y - top + PAD
    frame = (
        f'<rect class="frame" x="{SIDE}" y="{top:g}" width="{total_w - 2 * SIDE}" height="{height:g}" '
        'rx="10" fill="#f8fafc" stroke="#cbd5e1"/>'
    )
    return f'<g class="finished" data-box="finished">{frame}{"".join(texts)}</g>', height + 20


# -- a PNG, through a headless browser ---------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# a browser that draws and nothing else: no sandbox (root in a container), no GPU, and none
# of its own network traffic (updates, sync, QUIC), in a new empty profile each time
HEADLESS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--force-device-scale-factor=1",
)  # fmt: skip


def card_png(svg_text: str, path: Path) -> None:
    """Write the card as a PNG: a headless Chromium (or Chrome) screenshot of the SVG."""
    program = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    if program is None:
        raise CardError(
            "--png needs a Chromium or Chrome browser to draw the image, and none is installed "
            "(e.g. `apt-get install chromium`); --svg writes the same card without one"
        )
    size = _size(svg_text)
    with tempfile.TemporaryDirectory(prefix="todoflow-card-") as scratch:
        source, shot = Path(scratch) / "card.svg", Path(scratch) / "card.png"
        source.write_text(svg_text, encoding="utf-8")
        command = [
            program, *HEADLESS, f"--user-data-dir={scratch}/profile",
            f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}", source.as_uri(),
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired:
            raise CardError(f"{program} took more than 120 s to draw the card") from None
        if not shot.is_file():
            raise CardError(f"{program} drew no image: {done.stderr.strip()[-500:]}")
        path.write_bytes(shot.read_bytes())


def _size(svg_text: str) -> tuple[int, int]:
    head = svg_text[: svg_text.index(">")]
    numbers = [head.split(f'{name}="', 1)[1].split('"', 1)[0] for name in ("width", "height")]
    return int(float(numbers[0]) + 0.5), int(float(numbers[1]) + 0.5)


def _count(number: int, noun: str) -> str:
    """`1 step`, `2 steps`."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
