"""`make screenshots`: the pictures in docs/images, drawn again from the release example.

The plan canvas (html, LR) and the run card (SVG) of a scripted run of
examples/release.todoflow, stopped at Task 3/4 and complete, each taken by headless
Chromium (tests/chromium.py). Fixed process ids and a fixed clock, so the same code
draws the same pictures.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import yaml

import todoflow
from todoflow.compiler.canvas import plan_canvas
from todoflow.compiler.canvas_svg import html
from todoflow.runtime import process
from todoflow.runtime.agents import ScriptedAgent
from todoflow.runtime.card import card_svg
from todoflow.runtime.driver import drive

from .chromium import Browser, missing

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "release.todoflow"
REPLIES = ROOT / "examples" / "replies" / "release.yaml"


def _card(scratch: Path, process_id: str, replies: int | None) -> str:
    """The card's SVG after the first `replies` scripted replies (all of them: None)."""
    compiled = todoflow.compile(EXAMPLE, path="examples/release.todoflow")
    compiled.raise_for_errors()
    workspace = scratch / process_id
    workspace.mkdir()
    assert compiled.workflow is not None
    meta = {"process_id": process_id, "title": compiled.workflow.title, "workspace": str(workspace)}
    runs = scratch / "runs"
    process.create(runs, compiled.artifacts, meta, clock=lambda: "2026-12-01T09:00:00.000Z")
    engine, store = process.open_process(runs, process_id, clock=lambda: "2026-12-01T09:00:00.000Z")
    script = yaml.safe_load(REPLIES.read_text(encoding="utf-8"))["replies"]
    try:
        drive(engine, ScriptedAgent(script[:replies], workspace), io.StringIO())
        directive = engine.directive()
    finally:
        store.close()
    return card_svg(directive, process.final_todos(runs / process_id, directive.state.completed_steps))


def main(out: Path) -> None:
    reason = missing()
    if reason:
        raise SystemExit(f"screenshots: {reason}")
    out.mkdir(parents=True, exist_ok=True)
    browser = Browser()
    try:
        with tempfile.TemporaryDirectory(prefix="todoflow-screenshots-") as name:
            scratch = Path(name)
            workflow = todoflow.compile(EXAMPLE).workflow
            assert workflow is not None
            pages = {
                "release-plan.png": ("release-plan.html", html(plan_canvas(workflow), "LR"), "svg"),
                "release-card.png": ("card.svg", _card(scratch, "release-demo", 3), "svg"),
                "release-card-complete.png": ("done.svg", _card(scratch, "release-done", None), "svg"),
            }
            for picture, (source, text, selector) in pages.items():
                (scratch / source).write_text(text, encoding="utf-8")
                page = browser.page()
                page.open(scratch / source)
                page.screenshot(out / picture, selector)
                page.close()
                print(f"wrote {out / picture}", file=sys.stderr)
    finally:
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images")
