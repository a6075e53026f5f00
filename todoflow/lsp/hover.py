"""Hover: what a construct resolves to, which the text alone does not show.

On a task: its position after dependency ordering and the constraints attached to it.
On a step (its id, a `next` naming it, a route leading to it): the LLM it runs with and
where that came from, the step it continues with, its expected files. On a keyword:
what it means and what it becomes in the compiled files. The resolution rules are the
compiler's (LANGUAGE.md §4): a step's own item, else the workflow default.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, TypeVar

from lark import Token

from todoflow.compiler.checklist import describe as describe_task
from todoflow.compiler.checklist import resolve_checklist
from todoflow.compiler.ordering import order_tasks
from todoflow.dsl import ast
from todoflow.dsl.spans import Span

from . import keywords
from .outline import keyword_types, span_of
from .positions import contains
from .snapshot import Snapshot

_T = TypeVar("_T")


class _Placed(NamedTuple):
    """A step with where it stands: its index among the top-level steps, or its
    orchestrator and route when it is a sub-agent."""

    step: ast.Step
    top: int  # the index of its top-level step
    orchestrator: ast.Step | None
    route: ast.Route | None


def hover(snapshot: Snapshot, point: tuple[int, int]) -> tuple[str, Span] | None:
    """Markdown for the construct at `point`, and the span of the word it is about."""
    token = _token_at(snapshot, point)
    if token is None:
        return None
    where = span = span_of(token, snapshot.path)
    if token.type in keyword_types():
        before = _before(snapshot, token)
        entry = keywords.describe(str(token), before)
        return (keywords.markdown(entry), where) if entry else None
    workflow = snapshot.parsed.workflow
    if workflow is None:
        return None
    for placed in _placed(workflow):
        block = _first(placed.step.items, ast.Tasks)
        if block is None or not contains(block.span, point):
            continue
        if token.type == "ID":  # a label, or a label named in `after` or `on`
            found = (i for i, t in enumerate(block.tasks) if t.label and t.label.value == str(token))
        else:
            found = (i for i, t in enumerate(block.tasks) if contains(t.span, point))
        index = next(found, None)
        if index is not None:
            return _task(block, placed.step, index), where
    name = next((n for n in snapshot.outline.names if n.span == span), None)
    if name is None or name.role not in ("step", "next", "route"):
        return None
    wanted = name.target if name.role == "route" else name.value
    placed_step = next((p for p in _placed(workflow) if p.step.id.value == wanted), None)
    return (_step(workflow, placed_step), where) if placed_step else None


def _token_at(snapshot: Snapshot, point: tuple[int, int]) -> Token | None:
    for token in snapshot.scan.tokens:
        if token.value and contains(span_of(token, snapshot.path), point):
            return token
    return None


def _before(snapshot: Snapshot, token: Token) -> str | None:
    tokens = snapshot.scan.tokens
    index = next(i for i, t in enumerate(tokens) if t is token)
    return tokens[index - 1].type if index else None


def _placed(workflow: ast.Workflow) -> Iterator[_Placed]:
    def nested(step: ast.Step, index: int) -> Iterator[_Placed]:
        for route in (i for i in step.items if isinstance(i, ast.Route)):
            yield _Placed(route.step, index, step, route)
            yield from nested(route.step, index)

    for index, top in enumerate(workflow.steps):
        yield _Placed(top, index, None, None)
        yield from nested(top, index)


def _first(items: tuple[ast.Item, ...], kind: type[_T]) -> _T | None:
    return next((i for i in items if isinstance(i, kind)), None)


def _task(block: ast.Tasks, step: ast.Step, index: int) -> str:
    tasks = block.tasks
    labels = {t.label.value: i for i, t in enumerate(tasks) if t.label}
    ordering = order_tasks([[labels[a.value] for a in t.after if a.value in labels] for t in tasks])
    checked, _ = resolve_checklist(block, step.id.value)
    title = describe_task(tasks, index)
    if not ordering.order or checked is None:
        return f"**{title}** of step `{step.id.value}`\n\nno position yet: this `tasks` block has errors"
    position = ordering.order.index(index) + 1
    lines = [f"**{title}** — position **{position}** of {len(tasks)} in step `{step.id.value}`"]
    needs = [describe_task(tasks, m.because) for m in ordering.moves if m.task == index]
    needed_by = [describe_task(tasks, m.task) for m in ordering.moves if m.because == index]
    if needs:
        lines.append(f"written {_ordinal(index + 1)}, moved later: it needs {', '.join(needs)}")
    elif position != index + 1:
        why = f": {', '.join(needed_by)} needs it" if needed_by else ", as the tasks before it moved"
        lines.append(f"written {_ordinal(index + 1)}, comes earlier{why}")
    constraints = checked[position - 1].constraints
    if constraints:
        lines.append("constraints:\n" + "\n".join(f"- {c}" for c in constraints))
    return "\n\n".join(lines)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _step(workflow: ast.Workflow, placed: _Placed) -> str:
    step = placed.step
    lines = [f"**{step.kind} `{step.id.value}`** — {step.title.value}"]
    for kind, label in ((ast.Llm, "LLM"), (ast.ConditionalLlm, "conditional LLM")):
        lines.append(f"- {label}: " + _llm(workflow, step, kind))
    turns, origin = _resolved(workflow, step, ast.MaxTurns)
    if turns is not None:
        lines.append(f"- max turns: {turns.value} ({origin})")
    lines.append(f"- next: {_next(workflow, placed)}")
    files = list(dict.fromkeys(e.path.value for e in step.items if isinstance(e, ast.Expect)))
    lines.append("- expected files: " + (", ".join(f"`{f}`" for f in files) or "none"))
    return "\n".join(lines)


def _resolved(workflow: ast.Workflow, step: ast.Step, kind: type[_T]) -> tuple[_T | None, str]:
    own = _first(step.items, kind)
    if own is not None:
        return own, "set on this step"
    default = _first(workflow.defaults, kind)
    if default is not None:
        return default, f"workflow default, line {default.span.line}"  # type: ignore[attr-defined]
    return None, ""


def _llm(workflow: ast.Workflow, step: ast.Step, kind: type[ast.Llm | ast.ConditionalLlm]) -> str:
    item, origin = _resolved(workflow, step, kind)
    if item is None:
        return "none set: the runtime's default"
    return f'`{item.provider.value}` `"{item.model.value}"` ({origin})'


def _next(workflow: ast.Workflow, placed: _Placed) -> str:
    if placed.orchestrator is not None and placed.route is not None:
        orchestrator, route = placed.orchestrator.id.value, placed.route.id.value
        return f"returns to its orchestrator `{orchestrator}` (a sub-agent behind route `{route}`)"
    explicit = _first(placed.step.items, ast.Next)
    if explicit is not None:
        return f"`{explicit.target.value}` (written)"
    following = workflow.steps[placed.top + 1 : placed.top + 2]
    if following:
        return f"`{following[0].id.value}` (the step written after it)"
    return "`end` (the last step)"
