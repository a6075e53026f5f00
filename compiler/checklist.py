"""A `tasks` block -> the ordered, numbered checklist, or the diagnostics that forbid one.

Checks every rule of a ready checklist (1-100 tasks, non-empty texts of at most
1,000 characters, unique labels, known labels in `after` and `constraint`, no
dependency cycle), orders the tasks (`compiler.ordering`) and reports each task the
order moved as a note. Constraints are attached to the tasks they name.
"""

from __future__ import annotations

import difflib

from todoflow.dsl import ast
from todoflow.dsl.diagnostics import Diagnostic, Note

from .model import CheckedTask
from .ordering import order_tasks

MAX_TASKS = 100
MAX_TEXT = 1000


def resolve_checklist(
    block: ast.Tasks, step_id: str
) -> tuple[tuple[CheckedTask, ...] | None, list[Diagnostic]]:
    tasks = block.tasks
    found = _count(block, step_id) + _texts(block) + _labels(tasks)
    labels = {t.label.value: i for i, t in enumerate(tasks) if t.label and t.label.value != "all"}
    found += _references(block, labels)
    needs = [[labels[a.value] for a in t.after if a.value in labels] for t in tasks]
    ordering = order_tasks(needs)
    for cycle in ordering.cycles:
        found.append(_cycle(tasks, cycle))
    for move in ordering.moves:
        found.append(_moved(tasks, move.task, move.because))
    if any(d.is_error for d in found):
        return None, found
    constraints = _constraints(block, labels, len(tasks))
    checked = tuple(
        CheckedTask(
            position,
            tasks[index].label.value if tasks[index].label else None,  # type: ignore[union-attr]
            tasks[index].action.value,
            tasks[index].expected.value,
            constraints[index],
            tuple(dict.fromkeys(a.value for a in tasks[index].after)),
        )
        for position, index in enumerate(ordering.order, start=1)
    )
    return checked, found


def describe(tasks: tuple[ast.Task, ...], index: int) -> str:
    task = tasks[index]
    if task.label:
        return f"task `{task.label.value}`"
    action = task.action.value.replace("\n", " ")
    short = action if len(action) <= 40 else action[:39] + "…"
    return f'task {index + 1} ("{short}")'


def _count(block: ast.Tasks, step_id: str) -> list[Diagnostic]:
    count = len(block.tasks)
    if count == 0:
        message = f"the `tasks` block of step `{step_id}` has no tasks"
        help = "write at least one task, or remove the block to let the orchestrator compose the list"
    elif count > MAX_TASKS:
        message = f"the `tasks` block of step `{step_id}` has {count} tasks; at most {MAX_TASKS}"
        help = "split the work over several steps"
    else:
        return []
    return [Diagnostic("E0304", "error", message, block.span, help)]


def _texts(block: ast.Tasks) -> list[Diagnostic]:
    found = []
    for task in block.tasks:
        for text, what in ((task.action, "action"), (task.expected, "expected result")):
            found += _text(text, what)
    for constraint in block.constraints:
        found += _text(constraint.text, "constraint")
    return found


def _text(text: ast.Text, what: str) -> list[Diagnostic]:
    if not text.value.strip():
        return [Diagnostic("E0305", "error", f"this {what} is empty", text.span, f"say what the {what} is")]
    if len(text.value) > MAX_TEXT:
        message = f"this {what} is {len(text.value):,} characters; at most {MAX_TEXT:,}"
        return [Diagnostic("E0306", "error", message, text.span, "shorten it, or split the task in two")]
    return []


def _labels(tasks: tuple[ast.Task, ...]) -> list[Diagnostic]:
    found = []
    first: dict[str, ast.Name] = {}
    for task in tasks:
        label = task.label
        if label is None:
            continue
        if label.value == "all":
            help = "`on all` names every task; choose another label"
            found.append(Diagnostic("E0307", "error", "`all` cannot be a task label", label.span, help))
        elif label.value in first:
            note = Note("first used here", first[label.value].span)
            message = f"the task label `{label.value}` is used twice"
            found.append(
                Diagnostic("E0303", "error", message, label.span, "give each task its own label", (note,))
            )
        else:
            first[label.value] = label
    return found


def _references(block: ast.Tasks, labels: dict[str, int]) -> list[Diagnostic]:
    names = [name for task in block.tasks for name in task.after]
    names += [name for constraint in block.constraints for name in constraint.targets]
    found = []
    for name in names:
        if name.value not in labels:
            known = ", ".join(f"`{label}`" for label in labels) or "none (label a task with `label: ...`)"
            message = f"no task is labelled `{name.value}` in this `tasks` block"
            close = difflib.get_close_matches(name.value, list(labels), n=1, cutoff=0.6)
            help = f"did you mean `{close[0]}`?" if close else f"the labels here are {known}"
            found.append(Diagnostic("E0302", "error", message, name.span, help))
    return found


def _after_reference(task: ast.Task, target: str) -> ast.Name:
    return next(name for name in task.after if name.value == target)


def _cycle(tasks: tuple[ast.Task, ...], cycle: tuple[int, ...]) -> Diagnostic:
    names = [describe(tasks, i) for i in cycle]
    links = [(i, cycle[(k + 1) % len(cycle)]) for k, i in enumerate(cycle)]
    spans = [_after_reference(tasks[i], tasks[j].label.value).span for i, j in links]  # type: ignore[union-attr]
    if len(cycle) == 1:
        message = f"{names[0]} needs its own result"
        help = "remove it from its own `after` list"
    elif len(cycle) == 2:
        message = f"{names[0]} and {names[1]} need each other's result"
        help = "remove one of the two `after` links; no order satisfies both"
    else:
        listed = ", ".join(names[:-1]) + f" and {names[-1]}"
        message = f"{listed} need each other's results in a cycle"
        help = "remove one of the `after` links; no order satisfies them all"
    notes = tuple(
        Note(f"{describe(tasks, i)} needs {describe(tasks, j)} here", span)
        for (i, j), span in zip(links[1:], spans[1:], strict=True)
    )
    return Diagnostic("E0301", "error", message, spans[0], help, notes)


def _moved(tasks: tuple[ast.Task, ...], task: int, because: int) -> Diagnostic:
    needed = tasks[because].label.value  # type: ignore[union-attr]
    message = f"{describe(tasks, task)} moved after `{needed}`: it needs `{needed}`"
    return Diagnostic("N0301", "note", message, _after_reference(tasks[task], needed).span)


def _constraints(block: ast.Tasks, labels: dict[str, int], count: int) -> list[tuple[str, ...]]:
    attached: list[list[str]] = [[] for _ in range(count)]
    for constraint in block.constraints:
        targets = range(count) if constraint.on_all else sorted({labels[t.value] for t in constraint.targets})
        for index in targets:
            attached[index].append(constraint.text.value)
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}  # most tasks share the same constraints
    return [shared.setdefault(tuple(texts), tuple(texts)) for texts in attached]
