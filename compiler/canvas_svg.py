"""The plan canvas as SVG, laid out here (no external program), and as one HTML page.

Layout: the top-level steps that run go along the main axis (left to right for LR, top
to bottom for TB) in lane 0, then `end`; a route's sub-agent is one rank further on, in
a lane of its own beside the main one, reached by an elbow line from its parent with
the route's name and condition written in the free space before it; the steps that
never run come in a lane after every other. Ranks and lanes never share a box, and an
edge only crosses the gap between two ranks, so no line crosses a box. Every text is
wrapped to its box (`canvas_text`); in the SVG each box is a `g[data-box]` whose
`rect.frame` holds all its text, which the browser tests check.
"""

from __future__ import annotations

from todoflow.dsl.nodes import node

from .canvas import STYLES, Canvas, CanvasEdge, CanvasNode, badge, edge_label, facts, style_of
from .canvas_text import FONT, LINE_HEIGHT, Lines, text_block, width, wrap, xml

NODE_W = 250
PAD = 12
END_W, END_H = 90, 44
MARGIN = 24
HEADER = 44  # the canvas title above the drawing
ENTRY = 24  # LR: where arrows meet a box, from its top; TB: where route arrows leave and enter it
RANK_GAP_LR = 200  # room for the route buses and labels; in TB each gap is as deep as its buses need
RANK_GAP_TB = 44  # between two ranks with no route between them
LANE_GAP = {"LR": 28, "TB": 36}
BUS_STEP = 10
LABEL_SIZE = 11
LABEL_LINES = 3
TB_LABEL_ROOM = LABEL_LINES * LABEL_SIZE * LINE_HEIGHT + 14


@node
class Box:
    item: CanvasNode
    rank: int
    lane: int
    height: float
    body: str  # the box's own SVG, drawn at (0, 0)


def svg(canvas: Canvas, direction: str = "LR") -> str:
    return _drawing(canvas, direction) + "\n"


def html(canvas: Canvas, direction: str = "LR") -> str:
    """One self-contained page: inline SVG and CSS, no script, nothing fetched."""
    legend = "".join(
        f'<span class="swatch" style="background:{STYLES[key][0]};border-color:{STYLES[key][1]}'
        f'{";border-style:dashed" if key in ("sub_agent", "idle") else ""}"></span>{name}'
        for key, name in (
            ("regular", "regular step"),
            ("todo_task", "todo_task step"),
            ("sub_agent", "a route's sub-agent"),
            ("idle", "never runs"),
        )
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        # the page can load nothing: it is complete as it is, also from file://
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{xml(canvas.title)} — plan</title>\n"
        "<style>\n"
        f"body {{ margin: 24px; font-family: {FONT}; color: #0f172a; background: #ffffff; }}\n"
        ".legend { font-size: 13px; color: #334155; margin: 0 0 12px; }\n"
        ".swatch { display: inline-block; width: 14px; height: 10px; border: 1.5px solid; "
        "border-radius: 3px; margin: 0 6px 0 16px; vertical-align: middle; }\n"
        ".swatch:first-child { margin-left: 0; }\n"
        "svg .node:hover .frame { stroke-width: 2.5; }\n"
        "</style>\n</head>\n<body>\n"
        f'<p class="legend">{legend}</p>\n'
        f"{_drawing(canvas, direction)}\n"
        "</body>\n</html>\n"
    )


def _drawing(canvas: Canvas, direction: str) -> str:
    boxes = _place(canvas)
    ranks = 1 + max(b.rank for b in boxes.values())
    lanes = 1 + max(b.lane for b in boxes.values())
    parents = _parents_per_gap(canvas, boxes)
    rank_pos: list[float]
    lane_pos: list[float]
    total_w: float
    total_h: float
    if direction == "LR":
        lane_size = [
            max((b.height for b in boxes.values() if b.lane == j), default=0.0) for j in range(lanes)
        ]
        rank_pos = [MARGIN + r * (NODE_W + RANK_GAP_LR) for r in range(ranks)]
        lane_pos = [MARGIN + HEADER + sum(lane_size[:j]) + j * LANE_GAP["LR"] for j in range(lanes)]
        total_w = rank_pos[-1] + NODE_W + MARGIN
        total_h = lane_pos[-1] + lane_size[-1] + MARGIN
    else:
        rank_size = [
            max((b.height for b in boxes.values() if b.rank == r), default=0.0) for r in range(ranks)
        ]
        gaps = [
            BUS_STEP * (2 + parents[r]) + TB_LABEL_ROOM if r in parents else RANK_GAP_TB for r in range(ranks)
        ]
        rank_pos = [MARGIN + HEADER + sum(rank_size[:r]) + sum(gaps[:r]) for r in range(ranks)]
        lane_pos = [MARGIN + j * (NODE_W + LANE_GAP["TB"]) for j in range(lanes)]
        total_w = lane_pos[-1] + NODE_W + MARGIN
        total_h = rank_pos[-1] + rank_size[-1] + MARGIN
    title = wrap(canvas.title, max(total_w - 2 * MARGIN, 200), 18, 1, bold=True)
    total_w = max(total_w, MARGIN * 2 + width(title.lines[0], 18, bold=True))

    def origin(box: Box) -> tuple[float, float]:
        main, cross = rank_pos[box.rank], lane_pos[box.lane]
        x, y = (main, cross) if direction == "LR" else (cross, main)
        if box.item.kind == "end":  # centred on the `next` line
            if direction == "LR":
                return x, y + ENTRY - END_H / 2
            return x + (NODE_W - END_W) / 2, y
        return x, y

    at = {node_id: origin(box) for node_id, box in boxes.items()}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:g}" height="{total_h:g}" '
        f'viewBox="0 0 {total_w:g} {total_h:g}" font-family="{FONT}" class="plan-canvas" '
        f'data-direction="{direction}">',
        f"<title>{xml(canvas.title)}</title>",
        _MARKERS,
        f'<rect width="{total_w:g}" height="{total_h:g}" fill="#ffffff"/>',
        text_block(MARGIN, MARGIN + 18, title, canvas.title, 18, bold=True),
    ]
    edges, labels = _edges(canvas, boxes, at, direction, parents, lane_pos, rank_pos)
    parts += edges
    for node_id, box in boxes.items():
        x, y = at[node_id]
        parts.append(f'<g transform="translate({x:g},{y:g})">{box.body}</g>')
    parts += labels
    parts.append("</svg>")
    return "\n".join(parts)


def _place(canvas: Canvas) -> dict[str, Box]:
    """Rank and lane of every node (see the module's docstring), with its drawn body."""
    place: dict[str, tuple[int, int]] = {}
    free: dict[int, int] = {}  # rank -> the first lane free in it
    main = [n for n in canvas.nodes if n.parent is None and (n.runs or n.kind == "end")]
    for rank, item in enumerate(main):
        place[item.id] = (rank, 0)
        free[rank] = 1

    def children(parent: CanvasNode) -> None:
        rank, lane = place[parent.id]
        for item in canvas.nodes:
            if item.parent == parent.id:
                at = max(free.get(rank + 1, 0), lane if parent.sub_agent else lane + 1)
                place[item.id] = (rank + 1, at)
                free[rank + 1] = at + 1
                children(item)

    for item in main:
        children(item)
    idle = [n for n in canvas.nodes if n.parent is None and not n.runs and n.kind != "end"]
    if idle:
        lane = max(lane for _, lane in place.values()) + 1
        for rank, item in enumerate(idle):
            place[item.id] = (rank, lane)
            free[rank] = max(free.get(rank, 0), lane + 1)
        for item in idle:
            children(item)
    boxes = {}
    for item in canvas.nodes:
        body, height = _end_body(item) if item.kind == "end" else _body(item)
        boxes[item.id] = Box(item, *place[item.id], height, body)
    return boxes


def _parents_per_gap(canvas: Canvas, boxes: dict[str, Box]) -> dict[int, int]:
    """rank -> how many nodes of that rank have routes (each gets its own bus line)."""
    found: dict[int, set[str]] = {}
    for edge in canvas.edges:
        if edge.kind == "route":
            found.setdefault(boxes[edge.source].rank, set()).add(edge.source)
    return {rank: len(sources) for rank, sources in found.items()}


def _body(item: CanvasNode) -> tuple[str, float]:
    style = style_of(item)
    fill, stroke, color = STYLES[style]
    room = NODE_W - 2 * PAD
    y: float = PAD + 12
    header_x = PAD + 22 if item.kind == "todo_task" or item.sub_agent else PAD
    content = [
        _icon(item, stroke),
        text_block(
            header_x,
            y,
            wrap(badge(item), room + PAD - header_x, 11, 1, bold=True),
            badge(item),
            11,
            color=stroke,
            bold=True,
        ),
    ]
    y += 20
    title = wrap(item.title, room, 14, 3, bold=True)
    content.append(text_block(PAD, y, title, item.title, 14, bold=True, color=color, css="title"))
    y += len(title.lines) * 14 * LINE_HEIGHT + 2
    step_id = wrap(str(item.step_id), room, 11, 1, mono=True)
    content.append(text_block(PAD, y, step_id, str(item.step_id), 11, mono=True, color="#475569"))
    y += 11 * LINE_HEIGHT + 4
    for line in facts(item):
        wrapped = wrap(line, room, 12, 2)
        content.append(text_block(PAD, y, wrapped, line, 12, color=color, css="fact"))
        y += len(wrapped.lines) * 12 * LINE_HEIGHT
    height = y - 12 + PAD + 4
    dash = ' stroke-dasharray="6 4"' if style in ("sub_agent", "idle") else ""
    frame = (
        f'<rect class="frame" width="{NODE_W}" height="{height:g}" rx="10" fill="{fill}" '
        f'stroke="{stroke}" stroke-width="1.5"{dash}/>'
    )
    attributes = (
        f'class="node {style}" data-box="{item.id}" data-step="{xml(str(item.step_id))}" '
        f'data-kind="{item.kind}" data-sub-agent="{str(item.sub_agent).lower()}"'
    )
    return f"<g {attributes}>{frame}{''.join(content)}</g>", height


def _end_body(item: CanvasNode) -> tuple[str, float]:
    fill, stroke, color = STYLES["finish"]
    return (
        f'<g class="node end" data-box="{item.id}" data-kind="end">'
        f'<rect class="frame" width="{END_W}" height="{END_H}" rx="{END_H / 2:g}" fill="{fill}" '
        f'stroke="{stroke}" stroke-width="2.5"/>'
        + text_block(
            END_W / 2 - width("End", 14, bold=True) / 2,
            END_H / 2 + 5,
            Lines(("End",), False),
            "",
            14,
            bold=True,
            color=color,
        )
        + "</g>",
        END_H,
    )


def _icon(item: CanvasNode, color: str) -> str:
    """The seed's icons, drawn: a list for a todo_task step, a bot for a sub-agent; else none."""
    at = f'transform="translate({PAD},{PAD})" stroke="{color}" fill="none" stroke-width="1.6"'
    if item.sub_agent:
        return (
            f'<g class="icon bot" {at}><rect x="1" y="4" width="14" height="10" rx="3"/>'
            f'<path d="M8 4V1"/><circle cx="8" cy="1" r="0.8" fill="{color}"/>'
            f'<circle cx="5.5" cy="9" r="1.2" fill="{color}" stroke="none"/>'
            f'<circle cx="10.5" cy="9" r="1.2" fill="{color}" stroke="none"/></g>'
        )
    if item.kind == "todo_task":
        return (
            f'<g class="icon list" {at}><path d="M6 3h9M6 8h9M6 13h9"/>'
            + "".join(f'<circle cx="2" cy="{y}" r="1.1" fill="{color}" stroke="none"/>' for y in (3, 8, 13))
            + "</g>"
        )
    return ""


_MARKERS = (
    "<defs>"
    '<marker id="arrow-next" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
    'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#475569"/></marker>'
    '<marker id="arrow-route" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
    f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{STYLES["sub_agent"][1]}"/></marker>'
    "</defs>"
)


def _edges(
    canvas: Canvas,
    boxes: dict[str, Box],
    at: dict[str, tuple[float, float]],
    direction: str,
    parents: dict[int, int],
    lane_pos: list[float],
    rank_pos: list[float],
) -> tuple[list[str], list[str]]:
    """The edges' paths, and their labels in the boxes they are written in."""
    paths, labels = [], []
    bus_index: dict[str, int] = {}
    for edge in canvas.edges:
        if edge.kind == "route" and edge.source not in bus_index:
            rank = boxes[edge.source].rank
            bus_index[edge.source] = sum(1 for s in bus_index if boxes[s].rank == rank)
    for edge in canvas.edges:
        source, target = boxes[edge.source], boxes[edge.target]
        (sx, sy), (tx, ty) = at[edge.source], at[edge.target]
        ends = f'data-source="{edge.source}" data-target="{edge.target}"'
        if edge.kind == "next":
            if direction == "LR":
                d = f"M{sx + NODE_W:g},{sy + ENTRY:g} H{tx - 2:g}"
            else:
                d = f"M{sx + NODE_W / 2:g},{sy + source.height:g} V{ty - 2:g}"
            paths.append(
                f'<path class="edge next" {ends} d="{d}" fill="none" stroke="#475569" stroke-width="1.8" '
                'marker-end="url(#arrow-next)"/>'
            )
            continue
        index = bus_index[edge.source]
        if direction == "LR":
            gap_left = sx + NODE_W
            bus = gap_left + 2 * BUS_STEP + index * BUS_STEP
            entry = ty + ENTRY
            d = f"M{gap_left:g},{sy + ENTRY + 14:g} H{bus:g} V{entry:g} H{tx - 2:g}"
            first = gap_left + BUS_STEP * (2 + parents[source.rank]) + 4
            region = (first, entry + 4, tx - 8 - first, target.height - ENTRY - 4)
        else:
            gap_top = rank_pos[source.rank] + max(b.height for b in boxes.values() if b.rank == source.rank)
            bus = gap_top + 2 * BUS_STEP + index * BUS_STEP
            drop = tx + ENTRY
            d = f"M{sx + NODE_W - ENTRY:g},{sy + source.height:g} V{bus:g} H{drop:g} V{ty - 2:g}"
            first = gap_top + BUS_STEP * (2 + parents[source.rank]) + 4
            region = (drop + 8, first, NODE_W - ENTRY - 8, ty - 6 - first)
        paths.append(
            f'<path class="edge route" {ends} d="{d}" fill="none" stroke="{STYLES["sub_agent"][1]}" '
            'stroke-width="1.6" stroke-dasharray="5 3" marker-end="url(#arrow-route)"/>'
        )
        labels.append(_label(edge, region))
    return paths, labels


def _label(edge: CanvasEdge, region: tuple[float, float, float, float]) -> str:
    """The route's name (bold) and condition, wrapped into the free space before its sub-agent."""
    x, y, room, height = region
    most = max(1, int(height // (LABEL_SIZE * LINE_HEIGHT)))
    name = wrap(str(edge.name), room, LABEL_SIZE, 1, bold=True)
    condition_text = str(edge.condition)
    condition = wrap(condition_text, room, LABEL_SIZE, max(1, min(LABEL_LINES + 2, most - 1)))
    color = STYLES["sub_agent"][2]
    step = LABEL_SIZE * LINE_HEIGHT
    return (
        f'<g class="edge-label" data-box="{edge.source}-{edge.target}" data-source="{edge.source}" '
        f'data-target="{edge.target}"><title>{xml(edge_label(edge))}</title>'
        f'<rect class="frame" x="{x - 3:g}" y="{y - 2:g}" width="{room + 6:g}" height="{height + 4:g}" '
        'fill="none"/>'
        + text_block(x, y + LABEL_SIZE, name, str(edge.name), LABEL_SIZE, bold=True, color=color)
        + text_block(x, y + LABEL_SIZE + step, condition, condition_text, LABEL_SIZE, color=color)
        + "</g>"
    )
