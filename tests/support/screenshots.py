"""`make screenshots`: the pictures in docs/images, drawn again from the release example.

The plan canvas (html, LR) and the run card (SVG) of a scripted run of
examples/release.todoflow, stopped at Task 3/4 and complete, and the report of a
scripted run of examples/orchestrated.todoflow (its `publish` step), each taken by
headless Chromium (tests/support/chromium.py). Fixed process ids, a fixed clock and the run's
paths shown as relative ones, so the same code draws the same pictures on any machine.
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
from todoflow.dsl.nodes import replace
from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import read_definition
from todoflow.runtime.store.base import final_todos
from todoflow.runtime.views.card import card_svg
from todoflow.runtime.views.report import read_run, run_report
from todoflow.runtime.views.report_html import render

from ..support.chromium import Browser, missing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "release.todoflow"
ORCHESTRATED = ROOT / "examples" / "orchestrated.todoflow"


def _run(scratch: Path, example: Path, process_id: str, replies: int | None = None) -> Path:
    """The run folder of `example` after its first `replies` scripted replies (None: all)."""
    definition = read_definition(example, f"examples/{example.name}").or_raise()
    workspace = scratch / process_id
    workspace.mkdir()
    engine = process.start(
        definition,
        scratch / "runs",
        workspace=workspace,
        learnings=workspace / "learnings",
        process_id=process_id,
        clock=lambda: "2026-12-01T09:00:00.000Z",
    )
    replies_file = ROOT / "examples" / "replies" / f"{example.stem}.yaml"
    script = yaml.safe_load(replies_file.read_text(encoding="utf-8"))["replies"]
    with engine:
        drive(engine, ScriptedAgent(script[:replies], workspace), io.StringIO())
    return scratch / "runs" / process_id


def _card(folder: Path) -> str:
    with process.open_process(folder.parent, folder.name)[0] as engine:
        directive = engine.directive()
        return card_svg(directive, final_todos(engine.store, directive.state.completed_steps))


def _report(folder: Path, example: Path) -> str:
    data = read_run(folder.parent, folder.name)
    shown = {
        "source": f"examples/{example.name}",
        "workspace": "workspace",
        "learnings": "workspace/learnings",
    }
    return render(run_report(replace(data, meta=data.meta.model_copy(update=shown))))


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
            orchestrated = _run(scratch, ORCHESTRATED, "docs-release-demo")
            pages = {
                "release-plan.png": ("release-plan.html", html(plan_canvas(workflow), "LR"), "svg"),
                "release-card.png": ("card.svg", _card(_run(scratch, EXAMPLE, "release-demo", 3)), "svg"),
                "release-card-complete.png": (
                    "done.svg",
                    _card(_run(scratch, EXAMPLE, "release-done")),
                    "svg",
                ),
                "orchestrated-report.png": (
                    "report.html",
                    _report(orchestrated, ORCHESTRATED),
                    "#step-publish",
                ),
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
