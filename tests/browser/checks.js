// Checks the browser tests (tests/runtime/views/test_browser.py) run on a drawn diagram, in the page.
// Geometry comes from the layout the browser made: element bounds in page pixels.
"use strict";
window.todoflowChecks = (() => {
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
  };
  const inside = (a, b, slack) =>
    a.left >= b.left - slack && a.top >= b.top - slack && a.right <= b.right + slack && a.bottom <= b.bottom + slack;
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const text = (el) => (el.textContent || "").replace(/\s+/g, " ").trim();
  const point = (path, at) => {
    const p = path.getPointAtLength(at);
    const m = path.getScreenCTM();
    return { x: m.a * p.x + m.c * p.y + m.e, y: m.b * p.x + m.d * p.y + m.f };
  };
  const contains = (r, p, slack) =>
    p.x >= r.left - slack && p.x <= r.right + slack && p.y >= r.top - slack && p.y <= r.bottom + slack;
  // the smallest box holding the point, or null
  const under = (p, boxes, slack) => {
    let best = null;
    for (const b of boxes) {
      if (contains(b.rect, p, slack)) {
        const area = (b.rect.right - b.rect.left) * (b.rect.bottom - b.rect.top);
        if (best === null || area < best.area) best = { name: b.name, area };
      }
    }
    return best && best.name;
  };
  const overlaps = (items) => {
    const out = [];
    for (let i = 0; i < items.length; i++)
      for (let j = i + 1; j < items.length; j++)
        if (overlap(items[i].rect, items[j].rect)) out.push(`${items[i].name} / ${items[j].name}`);
    return out;
  };
  // where each edge starts and ends: the boxes its first and last points are on
  const ends = (paths, boxes) =>
    paths.map((path) => {
      const length = path.getTotalLength();
      return { from: under(point(path, 0), boxes, 6), to: under(point(path, length), boxes, 6), length };
    });

  // A diagram drawn by mermaid: its text, its edges' ends, overlapping labels, labels
  // leaving their node's shape.
  function mermaidFacts(svg) {
    const nodes = [...svg.querySelectorAll("g.node")].map((g) => ({
      name: g.id + ": " + text(g),
      rect: box(g.querySelector(":scope > rect, :scope > path, :scope > circle, :scope > polygon, :scope > g") || g),
      label: g.querySelector(".label, text"),
    }));
    const labels = [...svg.querySelectorAll("g.edgeLabel")]
      .filter((g) => text(g) !== "")
      .map((g) => ({ name: text(g), rect: box(g) }));
    const paths = [...svg.querySelectorAll(".edgePaths path, path.transition, path.flowchart-link")];
    const unique = [...new Set(paths)];
    return {
      text: text(svg),
      edges: ends(unique, nodes),
      labelOverlaps: overlaps(labels),
      overflow: nodes
        .filter((n) => n.label && text(n.label) !== "" && !inside(box(n.label), n.rect, 1))
        .map((n) => n.name),
    };
  }

  async function renderMermaid(source) {
    const out = document.getElementById("out");
    out.innerHTML = "";
    try {
      const { svg } = await mermaid.render("diagram", source);
      out.innerHTML = svg;
    } catch (error) {
      return { error: String(error && error.message ? error.message : error) };
    }
    return mermaidFacts(out.querySelector("svg"));
  }

  // One of our own drawings (the plan canvas, the run card): every `g[data-box]` has a
  // `rect.frame` that must hold all of its text, and no two boxes overlap.
  function drawingFacts(svg) {
    const boxes = [...svg.querySelectorAll("[data-box]")].map((g) => ({
      name: g.getAttribute("data-box"),
      rect: box(g.querySelector(":scope > rect.frame")),
      group: g,
    }));
    const overflow = [];
    for (const b of boxes)
      for (const t of b.group.querySelectorAll("text"))
        if (!inside(box(t), b.rect, 0.5)) overflow.push(`${b.name}: ${text(t)}`);
    const nodes = boxes.filter((b) => b.group.classList.contains("node"));
    const paths = [...svg.querySelectorAll("path.edge")];
    return {
      text: text(svg),
      nodes: nodes.map((b) => ({
        id: b.name,
        kind: b.group.getAttribute("data-kind"),
        step: b.group.getAttribute("data-step"),
        subAgent: b.group.getAttribute("data-sub-agent") === "true",
        dashed: b.group.querySelector(":scope > rect.frame").getAttribute("stroke-dasharray") !== null,
        icon: (b.group.querySelector(".icon") || { getAttribute: () => null }).getAttribute("class"),
        text: text(b.group),
      })),
      edges: ends(paths, nodes).map((e, i) => ({
        ...e,
        source: paths[i].getAttribute("data-source"),
        target: paths[i].getAttribute("data-target"),
        kind: paths[i].classList.contains("route") ? "route" : "next",
      })),
      labels: [...svg.querySelectorAll("g.edge-label")].map((g) => ({
        source: g.getAttribute("data-source"),
        target: g.getAttribute("data-target"),
        text: text(g),
      })),
      overflow,
      overlaps: overlaps(boxes),
      size: box(svg),
    };
  }

  return { renderMermaid, drawingFacts };
})();
