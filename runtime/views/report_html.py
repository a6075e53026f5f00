"""The run report as one self-contained HTML page: `render(report)`.

Inline CSS and the two inline SVGs (the run card, the plan canvas), no script, and a
Content-Security-Policy that lets the page load nothing, so it reads the same from
`file://`, a mail attachment or a web server. Every text of the run goes through `xml`
(the drawings' escaping), every anchor is `report.anchor`'s; nothing here reads a clock,
so the same report gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from todoflow.compiler.canvas_svg import svg as canvas_svg
from todoflow.compiler.canvas_text import FONT, MONO, xml

from .report import (
    Iteration,
    LearningItem,
    ListItem,
    Problem,
    Report,
    Revision,
    Step,
    TaskRow,
    TodoRef,
    Validation,
    Who,
    anchor,
)

POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
ACTIONS = {  # the decision an iteration shows, by the log's action
    "submit_tasks": "checklist submitted",
    "confirm": "confirm",
    "delegate": "delegate",
    "continue": "continue",
    "teleport": "revise the checklist (teleport)",
    "revise": "revised checklist",
    "create_todo": "create_todo",
    "update_todo": "update_todo",
}


def render(report: Report) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{xml(report.title)} — run {xml(report.process_id)}</title>",
        f"<style>\n{STYLE}</style>",
        _visited_style(report),
        "</head>",
        "<body>",
        _header(report),
        _card(report),
        _plan(report),
        _problems(report.problems),
        *(_step(step) for step in report.steps),
        _learnings(report),
        _about(),
        "</body>",
        "</html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _visited_style(report: Report) -> str:
    """The canvas boxes of the steps and sub-agents the run went through, drawn bold."""
    if not report.visited:
        return ""
    boxes = ", ".join(f'#plan svg g.node[data-box="{node_id}"]' for node_id in report.visited)
    frames = ", ".join(f'#plan svg g.node[data-box="{node_id}"] > rect.frame' for node_id in report.visited)
    return f"<style>\n{boxes} {{ opacity: 1; }}\n{frames} {{ stroke-width: 3.5px; }}\n</style>"


def _link(target: str | None, shown: str) -> str:
    """`shown` (HTML) linked to the anchor `target`; as it is without one."""
    return f'<a href="#{target}">{shown}</a>' if target else shown


def _time(at: str) -> str:
    """A journal time, which breaks only after its date (`2026-01-01T` / `00:00:07.000Z`)."""
    date, t, time = at.partition("T")
    return f'<span class="at"><span>{xml(date + t)}</span><wbr><span>{xml(time)}</span></span>'


def _status(status: str) -> str:
    return f'<span class="status {anchor(status)}">{xml(status.replace("_", " "))}</span>'


def _header(report: Report) -> str:
    facts = "".join(f"<dt>{xml(label)}</dt><dd>{xml(value)}</dd>" for label, value in report.facts)
    contents = [f"<li>{_link('card', 'Run card')}</li>", f"<li>{_link('plan', 'Plan')}</li>"]
    if report.problems:
        contents.append(f"<li>{_link('problems', f'Problems ({len(report.problems)})')}</li>")
    for step in report.steps:
        done = f"{step.done}/{len(step.tasks)} done"
        contents.append(
            f"<li>{_link(step.anchor, xml(f'{step.number}. {step.step_id} — {step.title}'))} · {done}</li>"
        )
    contents.append(f"<li>{_link('learnings', f'Learnings ({len(report.learnings)})')}</li>")
    contents.append(f"<li>{_link('about', 'About this report')}</li>")
    return (
        '<header id="run">'
        f"<h1>{xml(report.title)}</h1>"
        f'<p class="where">{_status(report.status)} {xml(report.where)}</p>'
        f'<dl class="facts">{facts}</dl>'
        f"<nav><h2>Contents</h2><ol>{''.join(contents)}</ol></nav>"
        "</header>"
    )


def _card(report: Report) -> str:
    return f'<section id="card"><h2>Run card</h2><div class="drawing">{report.card}</div></section>'


def _plan(report: Report) -> str:
    if report.canvas is None:
        body = f'<p class="note">The plan canvas cannot be drawn: {xml(report.canvas_problem or "")}.</p>'
    else:
        names = {n.id: n.step_id or "end" for n in report.canvas.nodes}
        went = ", ".join(xml(names[node_id]) for node_id in report.visited) or "none yet"
        body = (
            '<p class="note">Drawn bold: the steps and sub-agents this run went through '
            f"({went}); faded: the rest.</p>"
            f'<div class="drawing scroll">{canvas_svg(report.canvas)}</div>'
        )
    return f'<section id="plan"><h2>Plan</h2>{body}</section>'


def _problems(problems: Iterable[Problem]) -> str:
    items = [
        f'<li><span class="problem">{xml(p.kind)}</span> {_link(p.iteration, xml(f"step {p.step_id}"))}'
        + (f" · {xml(p.todo.todo_id)} · {xml(p.todo.title)}" if p.todo else "")
        + f": {xml(p.text)}</li>"
        for p in problems
    ]
    if not items:
        return ""
    return f'<section id="problems"><h2>Problems</h2><ul class="problems">{"".join(items)}</ul></section>'


def _step(step: Step) -> str:
    state = "complete" if step.completed else "in progress"
    turns = (
        f" · {step.turns} orchestrator turns" if step.turns is not None and step.kind == "todo_task" else ""
    )
    return (
        f'<section class="step" id="{step.anchor}">'
        f'<h2><a href="#{step.anchor}">Step {step.number}</a> · {xml(step.step_id)} — {xml(step.title)}</h2>'
        f'<p class="meta">{xml(step.kind)} · {state} · {step.done}/{len(step.tasks)} done{turns}</p>'
        "<h3>Checklist</h3>"
        f"{_checklist(step.tasks)}"
        "<h3>Execution log</h3>"
        f'<ol class="timeline">{"".join(_iteration(i) for i in step.iterations)}</ol>'
        "</section>"
    )


def _checklist(tasks: tuple[TaskRow, ...]) -> str:
    if not tasks:
        return '<p class="note">No checklist yet.</p>'
    names = ("#", "Task", "Status", "Result and evidence", "Done by", "When")
    head = "<tr>" + "".join(f"<th>{name}</th>" for name in names) + "</tr>"
    return (
        f'<table class="checklist"><thead>{head}</thead><tbody>{"".join(map(_task, tasks))}</tbody></table>'
    )


def _task(task: TaskRow) -> str:
    done = task.confirmation
    result = [f'<p class="result">{xml(task.result)}</p>'] if task.result else []
    if done is not None:
        result.append(f'<p class="evidence"><span class="label">evidence</span> {xml(done.evidence)}</p>')
    elif task.status == "completed":
        result.append('<p class="note">counted done by a revision; nobody confirmed it</p>')
    if task.notes:
        result.append(f'<p class="notes"><span class="label">notes</span> {xml(task.notes)}</p>')
    by = _who(done.who) if done else ""
    if task.assigned and (done is None or task.assigned != done.who):
        by += f'<p class="note">assigned to {xml(task.assigned.name)}</p>'
    when = f'<p class="note">created {_time(task.created_at)}</p>'
    if done:
        when = f"<p>{_link(done.iteration, _time(done.at))}</p>" + when
    elif task.updated_at != task.created_at:
        when += f'<p class="note">updated {_time(task.updated_at)}</p>'
    priority = f' <span class="priority">{xml(task.priority)}</span>' if task.priority != "medium" else ""
    return (
        f'<tr id="{task.anchor}">'
        f'<td><a href="#{task.anchor}">{task.position}</a></td>'
        f'<td><p class="action">{xml(task.action)}{priority}</p>'
        f'<p class="expected"><span class="label">expected</span> {xml(task.expected_result)}</p>'
        f"{_constraints(task.constraints)}</td>"
        f"<td>{_status(task.status)}</td>"
        f"<td>{''.join(result)}</td>"
        f"<td>{by}</td>"
        f"<td>{when}</td>"
        "</tr>"
    )


def _constraints(constraints: tuple[str, ...]) -> str:
    """A task's constraints, as its ready checklist gave them (none: nothing shown)."""
    if not constraints:
        return ""
    items = "".join(f"<li>{xml(c)}</li>" for c in constraints)
    return f'<div class="constraints"><span class="label">constraints</span><ul>{items}</ul></div>'


def _who(who: Who) -> str:
    return f'<span class="who {anchor(who.kind)}">{xml(who.name)}</span>'


def _iteration(iteration: Iteration) -> str:
    decision = ACTIONS.get(iteration.action, iteration.action)
    rows = [("decision", xml(decision))]
    if iteration.who is not None:
        rows.append(("selected agent" if iteration.action == "delegate" else "by", _who(iteration.who)))
    if iteration.todo is not None:
        rows.append(("todo", _todo(iteration.todo)))
    rows += [(label, xml(text)) for label, text in iteration.fields]
    if iteration.result is not None:
        rows.append(("result", _status("completed" if iteration.result == "done" else "failed")))
    if iteration.validation is not None:
        rows.append(("prevalidation", _validation(iteration.validation)))
    if iteration.learning is not None:
        ref = iteration.learning
        found = "" if ref.anchor else " (not in the learnings folder now)"
        rows.append(("learning recorded", _link(ref.anchor, xml(ref.learning_id)) + found))
    fields = "".join(f"<dt>{xml(label)}</dt><dd>{value}</dd>" for label, value in rows)
    failed = " failed" if iteration.problems else ""
    lists = ""
    if iteration.submitted:
        lists = f'<div class="list"><h5>The checklist</h5>{_list(iteration.submitted)}</div>'
    if iteration.revision is not None:
        lists = _revision(iteration.revision)
    raw = "".join(
        f'<details class="raw"><summary>Raw JSON · entry {entry.seq} · {xml(entry.type)}</summary>'
        f"<pre>{xml(json.dumps(entry.data, indent=2, ensure_ascii=False))}</pre></details>"
        for entry in iteration.entries
    )
    return (
        f'<li class="iteration{failed}" id="{iteration.anchor}">'
        f'<h4><a href="#{iteration.anchor}">Iteration {iteration.number}</a> · {xml(decision)}'
        f' <span class="time">{_time(iteration.at)}</span></h4>'
        f'<dl class="fields">{fields}</dl>{lists}{raw}</li>'
    )


def _todo(todo: TodoRef) -> str:
    return _link(todo.anchor, xml(f"{todo.todo_id} · {todo.title}"))


def _validation(validation: Validation) -> str:
    if not validation.passed:
        return f"{_status('failed')} {xml(validation.reason or '')}"
    files = "".join(
        f'<li><code>{xml(path)}</code> <span class="digest">sha256 {xml(digest)}</span></li>'
        for path, digest in validation.files
    )
    return _status("passed") + (f'<ul class="files">{files}</ul>' if files else "")


def _list(items: Iterable[ListItem]) -> str:
    rows = []
    for item in items:
        change = f' <span class="change {anchor(item.change)}">{_change(item)}</span>' if item.change else ""
        rows.append(
            f'<li value="{item.position}" class="{anchor(item.change) if item.change else "kept"}">'
            f'{xml(item.action)} <span class="expected">→ {xml(item.expected_result)}</span>{change}</li>'
        )
    return f'<ol class="tasks">{"".join(rows)}</ol>'


def _change(item: ListItem) -> str:
    return f"moved from {item.was}" if item.change == "moved" else item.change


def _revision(revision: Revision) -> str:
    return (
        '<div class="revision">'
        f'<div class="list"><h5>Before</h5>{_list(revision.before)}</div>'
        f'<div class="list"><h5>After</h5>{_list(revision.after)}'
        f'<p class="note">resumes at task {revision.resume_from_task}; '
        "the tasks before it count as done</p></div>"
        "</div>"
    )


def _learnings(report: Report) -> str:
    if report.learnings_problem:
        body = f'<p class="note">The learnings folder cannot be read: {xml(report.learnings_problem)}</p>'
    elif report.learnings:
        folder = f" in <code>{xml(report.learnings_folder or '')}</code>" if report.learnings_folder else ""
        body = f'<p class="note">Recorded by this run{folder}, as the folder holds them now.</p>'
        body += "".join(map(_learning, report.learnings))
    else:
        body = (
            '<p class="note">This run recorded no learnings (only a route\'s validated work records one).</p>'
        )
    if report.missing_learnings:
        missing = ", ".join(xml(i) for i in report.missing_learnings)
        body += f'<p class="note">The journal proves learnings the folder does not hold: {missing}.</p>'
    return f'<section id="learnings"><h2>Learnings</h2>{body}</section>'


def _learning(item: LearningItem) -> str:
    record = item.record
    rows = [
        ("status", _status(record.status)),
        ("recorded", _link(item.iteration, _time(record.at))),
        ("route", xml(f"{record.route_id} (sub-agent {record.sub_step_id}) in step {record.step_id}")),
        ("todo", xml(f"{record.todo_id} · {record.todo_title}")),
        ("file", f"<code>{xml(item.file)}</code>"),
        ("instructions", xml(record.instructions)),
        ("success criteria", xml(record.success_criteria or "")),
        ("evidence", xml(record.evidence)),
        ("outcome", xml(record.outcome)),
    ]
    files = "".join(
        f'<li><code>{xml(f.path)}</code> <span class="digest">sha256 {xml(f.sha256)}</span></li>'
        for f in record.files
    )
    if files:
        rows.append(("validated files", f'<ul class="files">{files}</ul>'))
    fields = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows if value)
    return (
        f'<article class="learning" id="{item.anchor}">'
        f'<h3><a href="#{item.anchor}">{xml(record.id)}</a></h3><dl class="fields">{fields}</dl></article>'
    )


def _about() -> str:
    return (
        '<footer id="about"><h2>About this report</h2>'
        "<p>Made by <code>todoflow report</code> from the run folder alone: its journal (replayed into the "
        "execution log), its plan, its todos and the learnings folder its run.json names. It loads nothing: "
        "no script, font or image from anywhere. The same run gives the same file.</p>"
        "<p>Replies the engine refused are not here: a refused reply changes nothing, so the run folder "
        "keeps no trace of it, by design. Each step, task, iteration and learning has a stable anchor "
        "(<code>#step-ID</code>, <code>#step-ID-task-N</code>, <code>#step-ID-iteration-N</code>, "
        "<code>#learning-ID</code>).</p></footer>"
    )


STYLE = f"""\
:root {{ color-scheme: light; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0 auto; padding: 24px; max-width: 1240px; font: 14px/1.45 {FONT}; color: #0f172a;
  background: #ffffff; overflow-wrap: anywhere; }}
h1 {{ font-size: 26px; margin: 0 0 6px; }}
h2 {{ font-size: 20px; margin: 0 0 10px; }}
h3 {{ font-size: 16px; margin: 18px 0 8px; }}
h4 {{ font-size: 14px; margin: 0 0 6px; }}
h5 {{ font-size: 12px; margin: 0 0 4px; color: #475569; text-transform: uppercase; letter-spacing: .04em; }}
p {{ margin: 0 0 4px; }}
a {{ color: #6d28d9; }}
code, pre {{ font-family: {MONO}; font-size: 12px; }}
section, header, footer {{ margin: 0 0 28px; }}
:target {{ outline: 2px solid #a78bfa; outline-offset: 2px; }}
.where {{ font-size: 15px; }}
.facts {{ display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 14px; margin: 10px 0; }}
.facts dt {{ color: #64748b; }}
.facts dd {{ margin: 0; min-width: 0; }}
nav h2 {{ font-size: 14px; margin: 12px 0 4px; }}
nav ol {{ margin: 0; padding-left: 22px; }}
.drawing svg {{ display: block; max-width: 100%; height: auto; }}
.drawing.scroll {{ overflow-x: auto; }}
.drawing.scroll svg {{ max-width: none; }}
#plan svg g.node {{ opacity: .45; }}
.note {{ color: #64748b; font-size: 13px; }}
.status {{ display: inline-block; padding: 0 8px; border-radius: 9px; font-size: 12px; font-weight: bold;
  background: #e2e8f0; color: #334155; }}
.status.completed, .status.complete, .status.passed, .status.active {{ background: #dcfce7; color: #166534; }}
.status.in_progress, .status.running {{ background: #f3e8ff; color: #6b21a8; }}
.status.blocked, .status.failed {{ background: #fee2e2; color: #991b1b; }}
.status.stopped, .status.retired {{ background: #fef9c3; color: #854d0e; }}
.problems li {{ margin: 0 0 4px; }}
.problem {{ font-weight: bold; color: #991b1b; }}
.step {{ border-top: 2px solid #e2e8f0; padding-top: 16px; }}
.meta {{ color: #475569; }}
table.checklist {{ width: 100%; border-collapse: collapse; table-layout: fixed; }}
.checklist th, .checklist td {{ text-align: left; vertical-align: top; padding: 6px 8px;
  border-bottom: 1px solid #e2e8f0; }}
.checklist th {{ font-size: 12px; color: #475569; }}
.checklist th:nth-child(1) {{ width: 40px; }}
.checklist th:nth-child(2) {{ width: 28%; }}
.checklist th:nth-child(3) {{ width: 100px; }}
.checklist th:nth-child(5) {{ width: 15%; }}
.checklist th:nth-child(6) {{ width: 120px; }}
.checklist .at {{ font-size: 12px; }}
.at > span {{ white-space: nowrap; }}
.action {{ font-weight: bold; }}
.label {{ color: #64748b; font-size: 12px; }}
.expected {{ color: #475569; }}
.result {{ color: #15803d; }}
.priority {{ font-size: 11px; color: #9a3412; font-weight: normal; }}
.constraints ul {{ margin: 2px 0 0 0; padding-left: 18px; font-size: 12px; }}
.who.orchestrator {{ color: #6d28d9; }}
.who.route {{ color: #0e7490; }}
.who.generic {{ color: #b45309; }}
.timeline {{ list-style: none; margin: 0; padding: 0 0 0 18px; border-left: 3px solid #c4b5fd; }}
.iteration {{ margin: 0 0 14px; padding: 8px 12px; border: 1px solid #e9d5ff; border-radius: 8px;
  background: #faf5ff; }}
.iteration.failed {{ border-color: #fca5a5; background: #fef2f2; }}
.time {{ color: #64748b; font-weight: normal; font-size: 12px; }}
.fields {{ display: grid; grid-template-columns: 140px minmax(0, 1fr); gap: 2px 12px; margin: 0 0 6px; }}
.fields dt {{ color: #64748b; }}
.fields dd {{ margin: 0; min-width: 0; white-space: pre-wrap; }}
.files {{ margin: 2px 0; padding-left: 18px; }}
.digest {{ color: #64748b; font-size: 12px; }}
.revision {{ display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 12px; margin: 6px 0; }}
.list {{ margin: 6px 0; min-width: 0; }}
.tasks {{ margin: 0; padding-left: 26px; }}
.tasks li.removed {{ text-decoration: line-through; color: #991b1b; }}
.tasks li.new {{ color: #166534; }}
.change {{ font-size: 11px; font-weight: bold; text-decoration: none; display: inline-block; }}
details.raw {{ margin: 4px 0 0; }}
details.raw summary {{ cursor: pointer; color: #6d28d9; font-size: 12px; }}
details.raw pre {{ margin: 4px 0 0; padding: 8px; background: #ffffff; border: 1px solid #e2e8f0;
  border-radius: 6px; white-space: pre-wrap; overflow-wrap: anywhere; }}
.learning {{ margin: 0 0 14px; padding: 8px 12px; border: 1px dashed #0891b2; border-radius: 8px;
  background: #ecfeff; }}
.learning h3 {{ margin: 0 0 6px; font-size: 14px; }}
footer {{ border-top: 2px solid #e2e8f0; padding-top: 12px; color: #475569; }}
"""
