"""The run report as a person sees it: opened from file:// in headless Chromium
(tests/support/chromium.py) and checked on the page's own layout: nothing fetched, every anchor
there and every link landing on one, no text leaving its box, the raw JSON of every
entry in its `<details>`, the visited steps drawn bold, and hostile text shown as text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime.views.report import Report, read_run, run_report
from todoflow.runtime.views.report_html import render

from ...runtime.views.test_report import FLOW, orchestrated
from ...support.chromium import CHECKS, Page, missing
from . import test_browser

pytestmark = [pytest.mark.skipif(missing() is not None, reason=str(missing())), pytest.mark.slow]
browser, page = test_browser.browser, test_browser.page  # its fixtures: one Chromium, a tab per test

# every run of text outside the drawings, and the nearest box that is not inline: a line
# of the text that leaves that box is reported (the drawings have their own check)
OVERFLOW = """(() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const boxOf = (el) => {
    while (getComputedStyle(el).display.startsWith("inline")) el = el.parentElement;
    return el;
  };
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim() || node.parentElement.closest("svg")) continue;
    const box = boxOf(node.parentElement).getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width === 0) continue;
      const out_x = r.left < box.left - 1 || r.right > box.right + 1;
      if (out_x || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        out.push(node.textContent.trim().slice(0, 80));
        break;
      }
    }
  }
  return out;
})()"""


def _open(page: Page, report: Report, path: Path, width: int = 1280) -> None:
    path.write_text(render(report), encoding="utf-8")
    page.call(
        "Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False
    )
    page.open(path)
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")


def _entries(report: Report) -> list[Any]:
    return [dict(e.data) for s in report.steps for i in s.iterations for e in i.entries]


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("width", [1280, 760])
def test_the_report_in_the_browser(page: Page, tmp_path: Path, width: int) -> None:
    folder = orchestrated(tmp_path / "run")
    report = run_report(read_run(folder.parent, folder.name))
    path = tmp_path / "report.html"
    _open(page, report, path, width)
    page.screenshot(tmp_path / f"report-{width}.png", "body")
    assert page.requests() == [path.resolve().as_uri()]  # nothing fetched, from file://

    ids = page.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)")
    expected = [s.anchor for s in report.steps]
    expected += [t.anchor for s in report.steps for t in s.tasks]
    expected += [i.anchor for s in report.steps for i in s.iterations]
    expected += [item.anchor for item in report.learnings]
    assert len(ids) == len(set(ids)) and set(expected) <= set(ids)
    assert len(report.learnings) == 1 and report.learnings[0].anchor in ids
    targets = page.evaluate("[...document.querySelectorAll('a[href^=\"#\"]')].map(a => a.hash.slice(1))")
    assert targets and set(targets) <= set(ids)  # every link lands on something

    assert page.evaluate(OVERFLOW) == []
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")  # only the canvas scrolls
    page.load_script(CHECKS)
    for drawing in ("svg.run-card", "svg.plan-canvas"):
        facts = page.evaluate(f"todoflowChecks.drawingFacts(document.querySelector('{drawing}'))")
        assert (facts["overflow"], facts["overlaps"]) == ([], []), drawing

    raw = page.evaluate(
        "[...document.querySelectorAll('details.raw')].map(d => "
        "[d.open, d.querySelector('pre').getBoundingClientRect().height, d.querySelector('pre').textContent])"
    )
    assert [json.loads(text) for _, _, text in raw] == _entries(report)
    assert all(opened and height > 0 for opened, height, _ in raw)

    frames = page.evaluate(
        "[...document.querySelectorAll('svg.plan-canvas g.node')].map(g => [g.dataset.box, "
        "getComputedStyle(g).opacity, getComputedStyle(g.querySelector('rect.frame')).strokeWidth])"
    )
    assert report.canvas is not None
    for box, opacity, stroke in frames:
        visited = box in report.visited
        assert (opacity, stroke == "3.5px") == (("1", True) if visited else ("0.45", False)), box


HOSTILE_TITLE = 'Ship <script>window.pwned = 1</script> & \\"it\\" — ünïcödé 日本'
SAY = {
    "action": "</details></li></ol><script>window.pwned = 2</script>",
    "evidence": "\"quoted\" & 'single' </pre></td></tr></table> <!-- ü -->",
    "reasoning": '<img src=x onerror="window.pwned = 3"> &amp; ${x} {{ y }} ' + "no-break-" * 40,
}


def test_hostile_text_is_shown_as_text(page: Page, tmp_path: Path) -> None:
    source = FLOW.replace('"Ship it"', f'"{HOSTILE_TITLE}"')
    folder = orchestrated(tmp_path / "run", source, SAY)
    report = run_report(read_run(folder.parent, folder.name))
    path = tmp_path / "hostile.html"
    _open(page, report, path)
    page.screenshot(tmp_path / "hostile.png", "body")
    title = HOSTILE_TITLE.replace('\\"', '"')
    assert page.evaluate("document.querySelector('h1').textContent") == title
    assert page.evaluate("document.title") == f"{title} — run p-1"
    assert page.evaluate("document.querySelectorAll('script, img, iframe, object, embed').length") == 0
    assert page.evaluate("window.pwned === undefined")
    shown = _squash(page.evaluate("document.body.innerText"))
    for text in SAY.values():
        assert _squash(text) in shown, text
    raw = page.evaluate("[...document.querySelectorAll('details.raw pre')].map(p => p.textContent)")
    assert [json.loads(text) for text in raw] == _entries(report)  # no `</details>` closed one early
    assert page.requests() == [path.resolve().as_uri()]
    assert page.evaluate(OVERFLOW) == []
