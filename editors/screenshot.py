"""The picture in docs/editors.md: a workflow highlighted by the project's Pygments lexer,
with the diagnostic `todoflow check` (and so `todoflow lsp`) reports drawn as an editor
draws one — a squiggle under the span and the message in a hover box — rendered to an
HTML page and screenshotted in headless Chromium. Run by `make editor-screenshot`.

    .venv/bin/python editors/screenshot.py editors/screenshot.png
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter

from todoflow.compiler.analysis import analyze
from todoflow.dsl.highlight import TodoflowLexer

SOURCE = '''\
# Release 2.0: a checklist with dependencies and a constraint
workflow release "Release 2.0" {
    llm vertex "gemini-2.5-pro"

    regular prepare "Prepare release branch" {
        description "Create release/2.0 from main."
        output "branch.json"
        next publsh
    }

    todo_task publish "Publish" {
        needs "branch.json"
        tasks {
            tag: "Tag the release" => "git tag v2.0 exists" after build
            build: "Build wheels" => """
                dist/ holds a wheel and an sdist
                """
            constraint "Never push to main directly" on all
        }
    }
}
'''
LINE_HEIGHT = 21
WIDTH, HEIGHT = 980, 520


def page(source: str) -> str:
    analysis = analyze(source, "release.todoflow", Path.cwd())
    (problem,) = [d for d in analysis.diagnostics if d.is_error]
    span = problem.span
    formatter = HtmlFormatter(style="one-dark", nowrap=True)
    code = highlight(source, TodoflowLexer(), formatter)
    lines = source.rstrip("\n").split("\n")
    gutter = "\n".join(str(n) for n in range(1, len(lines) + 1))
    top = (span.line - 1) * LINE_HEIGHT
    message = html.escape(f"{problem.message}") + f'<span class="code"> todoflow({problem.code})</span>'
    help = html.escape(problem.help or "")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><style>
{formatter.get_style_defs(".code-area")}
body {{ margin: 0; background: #1e2127; font: 15px/1.4 "DejaVu Sans", sans-serif; }}
.window {{ width: {WIDTH}px; height: {HEIGHT}px; background: #282c34;
  display: flex; flex-direction: column; }}
.tab {{ background: #21252b; color: #d7dae0; padding: 8px 16px; font-size: 13px; }}
.tab b {{ background: #282c34; padding: 8px 16px; font-weight: normal; border-top: 2px solid #528bff; }}
.editor {{ display: flex; flex: 1; padding-top: 10px; }}
pre {{ margin: 0; font: 15px/{LINE_HEIGHT}px "DejaVu Sans Mono", monospace; }}
.gutter {{ color: #636d83; text-align: right; padding: 0 18px 0 14px; }}
.code-area {{ position: relative; color: #abb2bf; }}
.squiggle {{ position: absolute; top: {top + LINE_HEIGHT - 4}px; left: {span.column - 1}ch;
  width: {span.end_column - span.column}ch; height: 4px;
  background: url("data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg' width='6' height='4'>\
<path d='M0 3 L1.5 1 L3 3 L4.5 1 L6 3' stroke='%23f14c4c' fill='none'/></svg>") repeat-x; }}
.hover {{ position: absolute; top: {top + LINE_HEIGHT + 4}px; left: {span.column - 1}ch; width: 520px;
  background: #21252b; color: #d7dae0; border: 1px solid #454c59; padding: 8px 12px; font-size: 14px;
  box-shadow: 0 4px 12px rgba(0,0,0,.4); }}
.hover .code {{ color: #7f848e; }}
.hover .help {{ color: #98c379; margin-top: 4px;
  font-family: "DejaVu Sans Mono", monospace; font-size: 13px; }}
.status {{ background: #21252b; color: #9da5b4; font-size: 12px; padding: 4px 14px; }}
.status .error {{ color: #f14c4c; }}
</style></head><body><div class="window">
<div class="tab"><b>release.todoflow</b></div>
<div class="editor"><pre class="gutter">{gutter}</pre>
<div class="code-area"><pre>{code}</pre><div class="squiggle"></div>
<div class="hover">{message}<div class="help">help: {help}</div></div></div></div>
<div class="status"><span class="error">&#x2297; 1</span> &nbsp; todoflow lsp &nbsp;·&nbsp;
Ln {span.line}, Col {span.column}</div>
</div></body></html>
"""


def screenshot(document: str, out: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("editors/screenshot.py: no chromium on PATH (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "editor.html"
        page_file.write_text(document, encoding="utf-8")
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={Path(folder) / 'profile'}",
                "--hide-scrollbars",
                f"--window-size={WIDTH},{HEIGHT}",
                f"--screenshot={out.resolve()}",
                page_file.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


if __name__ == "__main__":
    screenshot(page(SOURCE), Path(sys.argv[1] if len(sys.argv) > 1 else "editors/screenshot.png"))
