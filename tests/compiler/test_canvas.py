"""The plan canvas and the machine diagrams as text: the model, escaping, determinism, the CLI.

How they look is checked in a browser (tests/runtime/views/test_browser.py); here, what they say.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import todoflow
from todoflow.compiler.canvas import END_ID, dot, mermaid, plan_canvas
from todoflow.compiler.canvas_svg import html, svg
from todoflow.compiler.canvas_text import ELLIPSIS, width, wrap
from todoflow.compiler.diagrams import dot as machine_dot
from todoflow.compiler.diagrams import markdown, mermaid_text
from todoflow.compiler.machine import workflow_machine
from todoflow.compiler.model import CheckedWorkflow

from ..conftest import EXAMPLES, FIXTURES, relative, run_cli

HOSTILE = FIXTURES / "diagrams" / "hostile.todoflow"
JUMPS = """\
workflow jumps "Jumps" {
    regular a "A" {
        description "a"
        next c
    }
    regular b "B" {
        description "b"
        next end
    }
    todo_task c "C" {
        description "c"
        route r "R" when "needed" {
            regular r-step "R step" {
                description "r"
            }
        }
        tasks {
            "one" => "one done"
            "two" => "two done"
        }
        next b
    }
    regular orphan "Orphan" {
        description "never"
    }
}
"""


def _workflow(source: object) -> CheckedWorkflow:
    compiled = todoflow.compile(source)  # type: ignore[arg-type]
    compiled.raise_for_errors()
    assert compiled.workflow is not None
    return compiled.workflow


def test_canvas_follows_next_step_id_with_sub_agents_after_their_parent() -> None:
    canvas = plan_canvas(_workflow(JUMPS))
    order = [(n.step_id, n.number, n.parent, n.runs) for n in canvas.nodes]
    assert order == [
        ("a", 1, None, True),
        ("c", 2, None, True),
        ("r-step", None, "s3_c", True),
        ("b", 3, None, True),
        (None, None, None, True),
        ("orphan", None, None, False),
    ]
    edges = [(e.source, e.target, e.kind, e.name, e.condition) for e in canvas.edges]
    assert edges == [
        ("s1_a", "s3_c", "next", None, None),
        ("s3_c", "s4_r_step", "route", "R", "needed"),
        ("s3_c", "s2_b", "next", None, None),
        ("s2_b", END_ID, "next", None, None),
    ]
    c = canvas.node("s3_c")
    assert (c.kind, c.routes, c.generic_agent, c.tasks) == ("todo_task", 1, True, 2)
    assert canvas.node("s5_orphan").next_step_id == "end"


def test_todo_task_facts_name_routes_agent_checklist_inputs_and_outputs() -> None:
    text = mermaid(plan_canvas(_workflow(EXAMPLES[0])))
    assert "2 routes #183; generic agent off" in text
    assert "checklist composed at run time" in text
    assert "in: sources.json" in text and "out: report.json" in text
    release = mermaid(plan_canvas(_workflow(FIXTURES.parent.parent / "examples" / "release.todoflow")))
    assert "checklist: 4 tasks" in release and "1 route #183; generic agent on" in release


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "svg"])
def test_the_canvas_shows_learn_code_each_steps_llm_and_turn_bound(fmt: str) -> None:
    """Issue 26, small things: what a step runs with, in every format, in the language's words."""
    from todoflow.compiler.canvas import renderers

    release = _workflow(FIXTURES.parent.parent / "examples" / "release.todoflow")
    ship = plan_canvas(release).node("s2_ship")
    assert (ship.mode, ship.llm, ship.conditional_llm, ship.max_turns) == (
        "learn_code",
        "vertex:gemini-2.5-pro",
        "openai:gpt-4.1-mini",
        100,
    )
    text = renderers()[fmt](plan_canvas(release), "LR")
    for fact in ("mode learn_code", "llm vertex:gemini-2.5-pro", "conditional_llm openai:gpt-4.1-mini"):
        assert fact in text, fact
    assert text.count("max_turns 100") == 1  # the todo_task step's; a regular step has no turns
    plain = plan_canvas(_workflow(JUMPS)).node("s3_c")
    assert (plain.mode, plain.llm, plain.max_turns) == (None, None, None)


def test_the_steps_end_and_the_workflows_end_are_told_apart() -> None:
    """Issue 26, small things: a todo_task step's final state is drawn `Done` (as a regular
    step's), so `End` is the workflow's alone."""
    machine = workflow_machine(_workflow(JUMPS))
    labels = [s.name for s in machine.all_states() if s.final]
    assert labels.count("End") == 1 and labels.count("Done") == len(labels) - 1
    assert sum(line.strip().startswith('state "End"') for line in markdown(machine).splitlines()) == 1


@pytest.mark.parametrize("direction", ["LR", "TB"])
@pytest.mark.parametrize("fmt", ["mermaid", "md", "dot", "svg", "html"])
def test_plan_view_is_deterministic(fmt: str, direction: str) -> None:
    args = ("graph", relative(HOSTILE), "--view", "plan", "--format", fmt, "--direction", direction)
    first, second = run_cli(*args), run_cli(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert "0x" not in first.stdout
    if fmt in ("mermaid", "md"):
        assert f"flowchart {direction}" in first.stdout
    if fmt == "dot":
        assert f"rankdir={direction};" in first.stdout
    if fmt in ("svg", "html"):
        assert f'data-direction="{direction}"' in first.stdout


def test_html_is_one_file_that_loads_nothing() -> None:
    page = html(plan_canvas(_workflow(HOSTILE)))
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in page  # the page may load nothing, even if it tried
    assert not re.search(r"<(script|link|img|iframe|object)\b|\s(src|href)=|url\((?!#)|@import", page)
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]  # the namespace


def test_svg_and_html_escape_every_title() -> None:
    for text in (svg(plan_canvas(_workflow(HOSTILE))), html(plan_canvas(_workflow(HOSTILE)))):
        assert "Build &amp; &lt;ship&gt;" in text
        assert "<ship>" not in text and "<one>" not in text
        assert "&quot;double&quot;" in text


def test_mermaid_text_leaves_nothing_mermaid_reads() -> None:
    hostile = 'Build & <ship> "q" #1; a|b {c} \\d %% e\nf [g] `h` ü 日本'
    escaped = mermaid_text(hostile)
    assert not re.search(r'[&<>"|{}\\%\[\]`\n]', escaped.replace("<br>", ""))
    assert re.sub(r"#\d+;", "", escaped).count("#") == 0 and re.sub(r"#\d+;", "", escaped).count(";") == 0
    assert "ü" in escaped  # letters stay readable in the text
    assert escaped.count("<br>") == 1


def test_machine_mermaid_has_no_end_id_mermaid_would_merge() -> None:
    for path in EXAMPLES:
        machine = workflow_machine(_workflow(path))
        ids = [s.id for s in machine.all_states()]
        assert not [i for i in ids if i.endswith(("_end", "_start")) and i != "end"]
        finals = [s.id for s in machine.all_states() if s.role == "end" and s.step_id]
        assert all(i.endswith("_complete") for i in finals)


def test_machine_dot_has_one_start_arrow_one_end_label_one_font() -> None:
    text = machine_dot(workflow_machine(_workflow(EXAMPLES[0])))
    assert len(re.findall(r'^\s*"[^"]*__start" -> "s1_', text, re.M)) == 1
    end_line = next(line for line in text.splitlines() if line.strip().startswith('"end" ['))
    assert end_line.count("label=") == 1 and 'label="End"' in end_line
    assert 'graph [fontname="Helvetica"];' in text


def test_markdown_carries_the_diagram_in_its_direction() -> None:
    machine = workflow_machine(_workflow(HOSTILE))
    text = markdown(machine, "TB")
    assert "```mermaid\nstateDiagram-v2\n    direction TB\n" in text
    assert text.startswith("### Build &amp; \\<ship\\>")
    assert "| prep-step: Work |" in text.replace("prep\\-step", "prep-step")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's `dot` is not installed")
@pytest.mark.parametrize("direction", ["LR", "TB"])
def test_dot_of_hostile_titles_is_read_by_graphviz(direction: str) -> None:
    workflow = _workflow(HOSTILE)
    for text in (dot(plan_canvas(workflow), direction), machine_dot(workflow_machine(workflow), direction)):
        done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=False)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert "Build &amp; &lt;ship&gt;" in done.stdout
        assert "\\back\\slash" in done.stdout  # backslashes kept, not read as escapes


def test_graph_view_usage_errors() -> None:
    html_machine = run_cli("graph", "examples/release.todoflow", "--format", "html")
    assert html_machine.returncode == 2 and "add --view plan" in html_machine.stderr
    plan_step = run_cli("graph", "examples/release.todoflow", "--view", "plan", "--step", "ship")
    assert plan_step.returncode == 2 and "--step draws one step's machine" in plan_step.stderr
    assert "Traceback" not in html_machine.stderr + plan_step.stderr


def test_wrap_cuts_only_with_an_ellipsis() -> None:
    text = "word " * 60
    lines = wrap(text, 200, 12, 3)
    assert lines.cut and len(lines.lines) == 3 and lines.lines[-1].endswith(ELLIPSIS)
    assert all(width(line, 12) <= 200 for line in lines.lines)
    whole = wrap("short text", 200, 12, 3)
    assert not whole.cut and whole.lines == ("short text",)
    broken = wrap("x" * 80, 100, 12, 10)
    assert not broken.cut and "".join(broken.lines) == "x" * 80  # a long word breaks, nothing lost
    paragraphs = wrap("one\ntwo\nthree", 200, 12, 2)
    assert paragraphs.cut and paragraphs.lines[-1].endswith(ELLIPSIS)
