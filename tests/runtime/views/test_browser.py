"""The diagrams, the plan canvas and the run card as a person sees them: drawn in headless
Chromium (tests/support/chromium.py) and checked on the page's own layout.

Mermaid text is drawn by the real mermaid library, so syntax our own tests would accept
and Mermaid would not is caught; our own SVGs are checked box by box: every text inside
its box, no two boxes overlapping, every edge starting and ending on the boxes it names,
no edge from a state to itself. Screenshots go to the test's folder.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import todoflow
from todoflow.compiler.canvas import Canvas, mermaid, plan_canvas
from todoflow.compiler.canvas_svg import html, svg
from todoflow.compiler.diagrams import mermaid as machine_mermaid
from todoflow.compiler.diagrams import svg as machine_svg
from todoflow.compiler.machine import workflow_machine
from todoflow.compiler.model import CheckedWorkflow
from todoflow.runtime import process
from todoflow.runtime.directive import Directive
from todoflow.runtime.store.base import final_todos
from todoflow.runtime.views.card import card_svg

from ...conftest import EXAMPLES, FIXTURES, run_cli
from ...support.chromium import CHECKS, MERMAID, Browser, Page, missing
from ...support.runtime_helpers import confirm, start

pytestmark = [pytest.mark.skipif(missing() is not None, reason=str(missing())), pytest.mark.slow]

HOSTILE = FIXTURES / "diagrams" / "hostile.todoflow"
WORKFLOWS = [*EXAMPLES, HOSTILE]
DIRECTIONS = ["LR", "TB"]


def _id(path: Path) -> str:
    return path.stem


def _workflow(path: Path) -> CheckedWorkflow:
    compiled = todoflow.compile(path)
    compiled.raise_for_errors()
    assert compiled.workflow is not None
    return compiled.workflow


def _squash(text: str) -> str:
    """Text without whitespace: a label wrapped over lines still contains it."""
    return re.sub(r"\s+", "", text)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = Browser()
    yield chromium
    chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    tab = browser.page()
    yield tab
    tab.close()


@pytest.fixture(scope="module")
def mermaid_page(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Page:
    if not MERMAID.is_file():
        pytest.skip(f"{MERMAID} is missing: `.ci/setup-mermaid` installs the npm package mermaid (needs npm)")
    page_file = tmp_path_factory.mktemp("mermaid") / "mermaid.html"
    page_file.write_text('<!DOCTYPE html><meta charset="utf-8"><body><div id="out"></div></body>\n')
    tab = browser.page()
    tab.open(page_file)
    tab.load_script(MERMAID)
    tab.load_script(CHECKS)
    tab.evaluate("mermaid.initialize({startOnLoad: false, securityLevel: 'strict'})")
    return tab


def _draw_mermaid(page: Page, text: str) -> dict[str, Any]:
    facts: dict[str, Any] = page.evaluate(f"todoflowChecks.renderMermaid({json.dumps(text)})")
    assert "error" not in facts, f"mermaid cannot draw it: {facts.get('error')}\n{text}"
    return facts


def _self_loops(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in edges if e["from"] is not None and e["from"] == e["to"]]


# -- the checklist machine, in mermaid ----------------------------------------------------


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("path", WORKFLOWS, ids=_id)
def test_machine_diagram_draws_in_mermaid(mermaid_page: Page, path: Path, direction: str) -> None:
    machine = workflow_machine(_workflow(path))
    facts = _draw_mermaid(mermaid_page, machine_mermaid(machine, direction))
    assert not [t for t in machine.transitions if t.source == t.target]  # so no edge may loop
    assert _self_loops(facts["edges"]) == []
    assert facts["labelOverlaps"] == []
    assert facts["overflow"] == []
    shown = _squash(facts["text"])
    for state in machine.all_states():
        assert _squash(state.name) in shown, state.name


def test_the_old_end_state_id_is_caught_as_a_self_loop(mermaid_page: Page) -> None:
    """The check above finds the bug it is there for: a final child named `<parent>_end`."""
    text = machine_mermaid(workflow_machine(_workflow(EXAMPLES[0])))
    old = re.sub(r"\b(s\d+_\w+?)_complete\b", r"\1_end", text)
    assert old != text
    assert _self_loops(_draw_mermaid(mermaid_page, old)["edges"]) != []


# -- the plan canvas -----------------------------------------------------------------------


def _expected_texts(canvas: Canvas) -> list[str]:
    texts = [n.title for n in canvas.nodes]
    texts += [f"{e.name}" for e in canvas.edges if e.kind == "route"]
    texts += [f"{e.condition}" for e in canvas.edges if e.kind == "route"]
    return texts


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("path", WORKFLOWS, ids=_id)
def test_plan_canvas_draws_in_mermaid(mermaid_page: Page, path: Path, direction: str) -> None:
    canvas = plan_canvas(_workflow(path))
    facts = _draw_mermaid(mermaid_page, mermaid(canvas, direction))
    assert _self_loops(facts["edges"]) == []
    assert len(facts["edges"]) == len(canvas.edges)
    assert facts["labelOverlaps"] == []
    assert facts["overflow"] == []
    shown = _squash(facts["text"])
    for text in _expected_texts(canvas):
        assert _squash(text) in shown, text


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("path", WORKFLOWS, ids=_id)
def test_plan_canvas_page(page: Page, tmp_path: Path, path: Path, direction: str) -> None:
    workflow = _workflow(path)
    canvas = plan_canvas(workflow)
    page_file = tmp_path / f"{path.stem}-{direction}.html"
    page_file.write_text(html(canvas, direction), encoding="utf-8")
    page.open(page_file)
    page.load_script(CHECKS)
    assert page.requests() == [page_file.resolve().as_uri()]  # nothing fetched: it is all in the file
    facts = page.evaluate("todoflowChecks.drawingFacts(document.querySelector('svg.plan-canvas'))")
    page.screenshot(tmp_path / f"{path.stem}-{direction}.png", "svg.plan-canvas")

    nodes = {n["id"]: n for n in facts["nodes"]}
    assert sorted(n["step"] for n in nodes.values() if n["kind"] != "end") == sorted(
        s.id for s in workflow.all_steps()
    )
    for item in canvas.nodes:
        drawn = nodes[item.id]
        assert drawn["subAgent"] == item.sub_agent
        if item.sub_agent:  # the seed: dashed border, a bot icon, no step number
            assert drawn["dashed"] and drawn["icon"] == "icon bot"
            assert drawn["text"].startswith("sub-agent")
        elif item.kind == "todo_task":
            assert drawn["icon"] == "icon list" and drawn["dashed"] != item.runs
    drawn_edges = {(e["source"], e["target"]): e for e in facts["edges"]}
    assert len(drawn_edges) == len(canvas.edges)
    for edge in canvas.edges:
        line = drawn_edges[(edge.source, edge.target)]
        assert (line["from"], line["to"], line["kind"]) == (edge.source, edge.target, edge.kind)
    labels = {(label["source"], label["target"]): _squash(label["text"]) for label in facts["labels"]}
    for edge in (e for e in canvas.edges if e.kind == "route"):
        assert _squash(f"{edge.name}") in labels[(edge.source, edge.target)]
        assert _squash(f"{edge.condition}") in labels[(edge.source, edge.target)]
    assert facts["overflow"] == []
    assert facts["overlaps"] == []
    shown = _squash(facts["text"])
    for text in _expected_texts(canvas):
        assert _squash(text) in shown, text


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_plan_canvas_svg_opens_on_its_own(page: Page, tmp_path: Path, direction: str) -> None:
    canvas = plan_canvas(_workflow(HOSTILE))
    drawing = tmp_path / "canvas.svg"
    drawing.write_text(svg(canvas, direction), encoding="utf-8")
    page.open(drawing)
    assert page.evaluate("document.documentElement.localName") == "svg"  # well-formed: no parser error
    assert page.evaluate("document.getElementsByTagName('parsererror').length") == 0
    assert _squash("Build & <ship>") in _squash(page.evaluate("document.documentElement.textContent"))


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's `dot` is not installed")
@pytest.mark.parametrize("path", WORKFLOWS, ids=_id)
def test_machine_svg_from_graphviz(page: Page, tmp_path: Path, path: Path) -> None:
    machine = workflow_machine(_workflow(path))
    drawing = tmp_path / "machine.svg"
    drawing.write_text(machine_svg(machine), encoding="utf-8")
    page.open(drawing)
    titles = page.evaluate("[...document.querySelectorAll('g.edge > title')].map(t => t.textContent)")
    initial = next(s for s in machine.states if s.initial)
    first = next(c.id for c in initial.children if c.initial) if initial.children else initial.id
    assert [t for t in titles if t.endswith(f"->{first}")] == [f"__start->{first}"]  # one start arrow
    end_label = page.evaluate(
        "[...document.querySelectorAll('g.node')].find(g => g.querySelector('title').textContent === 'end')"
        ".querySelector('text').textContent"
    )
    assert end_label == "End"
    fonts = page.evaluate(
        "[...new Set([...document.querySelectorAll('text')].map(t => t.getAttribute('font-family')))]"
    )
    assert fonts == ["Helvetica,sans-Serif"]  # cluster titles too


# -- the run card ------------------------------------------------------------------------

LONG = (
    "Migrate every service in the fleet from the old configuration format to the new one, one by one, "
    "checking each service's health endpoint after the switch and rolling back any service whose health "
    "check fails within five minutes of the change; then record which services moved"
)
FLOW = """\
workflow cards "Cards & <more>" {
    regular first "First step" {
        description "Do the first thing."
    }
    todo_task work "Do the work" {
        description "Work through the list."
    }
}
"""


def _card_states(tmp_path: Path) -> Iterator[tuple[str, Directive, Path]]:
    """The card at each kind of moment of one run: intake, a task, revision, complete."""
    engine, store = start(tmp_path, FLOW, "cards-1")
    folder = tmp_path / "runs" / "cards-1"
    try:
        directive = engine.step(engine.directive().attempt_id, confirm(0))
        yield "intake", directive, folder
        tasks = [{"action": LONG, "expected_result": "every service healthy " * 12}] + [
            {"action": f"Task number {n}", "expected_result": f"task {n} done"} for n in range(2, 16)
        ]
        directive = engine.step(
            directive.attempt_id, {"tasks": tasks, "progress_checklist_outcome": "15 tasks"}
        )
        yield "long-action", directive, folder
        for n in range(1, 9):
            directive = engine.step(directive.attempt_id, confirm(n))
        yield "task-9", directive, folder
        directive = engine.step(directive.attempt_id, {"teleportTo": "teleport-revise-tasks"})
        yield "revise", directive, folder
        revision = {
            "tasks": tasks[:10],
            "resume_from_task": 9,
            "progress_checklist_outcome": "cut to ten",
            "progress_execution_outcome": "the rest is not needed",
        }
        directive = engine.step(directive.attempt_id, revision)
        for n in range(9, 11):
            directive = engine.step(directive.attempt_id, confirm(n))
        yield "complete", directive, folder
    finally:
        store.close()


def test_run_card_in_the_browser(page: Page, tmp_path: Path) -> None:
    seen = []
    for moment, directive, folder in _card_states(tmp_path):
        with process.open_process(folder.parent, folder.name)[0] as opened:
            finished = final_todos(opened.store, directive.state.completed_steps)
        drawing = tmp_path / f"card-{moment}.svg"
        drawing.write_text(card_svg(directive, finished), encoding="utf-8")
        page.open(drawing)
        page.load_script(CHECKS)
        facts = page.evaluate("todoflowChecks.drawingFacts(document.documentElement)")
        page.screenshot(tmp_path / f"card-{moment}.png", "svg")
        assert facts["overflow"] == [], moment
        assert facts["overlaps"] == [], moment
        current = page.evaluate("[...document.querySelectorAll('g.block.current')].map(g => g.dataset.box)")
        shown = _squash(facts["text"])
        seen.append(moment)
        if moment == "intake":
            assert current == ["checklist"] and "nochecklistyet" in shown
            assert _squash("first: done") in shown
        elif moment == "long-action":
            assert current == ["work"] and "Task1/15" in shown
            assert _squash(LONG) in shown  # the full action, wrapped in the Work block
            action = page.evaluate("document.querySelector('[data-box=work] text.action').textContent")
            assert _squash(action) == _squash(LONG)
            assert _squash("… 3 more after") in shown  # a long list says what it leaves out
        elif moment == "task-9":
            assert current == ["work"] and "Task9/15" in shown and _squash("8/15 done") in shown
            states = page.evaluate("[...document.querySelectorAll('text.task')].map(t => t.classList[1])")
            assert states.count("current") == 1 and "done" in states and "pending" in states
            assert _squash("→ outcome 8") in shown  # per-task results
        elif moment == "revise":
            assert current == ["work"] and "Revisechecklist" in shown
        else:
            assert current == [] and _squash("10/10 done") in shown and "result{}" in shown
            assert _squash("all 10 tasks done") in shown
            assert _squash("work: 10/10 done") in shown and _squash("first: done") in shown
    assert seen == ["intake", "long-action", "task-9", "revise", "complete"]


def test_status_png_is_the_card_drawn_by_chromium(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text(FLOW)
    typed = "did it\nfirst done\nsweep => floor clean\n\none chore\nquit\n"
    run_cli("run", str(flow), "--agent", "human", stdin=typed, cwd=tmp_path)
    (run,) = [p.name for p in (tmp_path / ".todoflow" / "runs").iterdir()]
    done = run_cli("status", run, "--png", "card.png", "--svg", "card.svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    image = (tmp_path / "card.png").read_bytes()
    assert image[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")
    declared = re.search(r'width="(\d+)" height="([\d.]+)"', (tmp_path / "card.svg").read_text())
    assert declared is not None
    assert (width, height) == (int(declared[1]), round(float(declared[2])))
