"""Decompile: plan.json (+ step_config.json, the prompts beside it) -> canonical source.

The plan is turned into the same AST the parser builds and printed by the formatter,
so the output is canonical. Compiling it gives back the same plan.json,
step_config.json and prompts: lossless, or warned. A setting every step has becomes a
workflow default (the most common value; steps that differ keep their own), task
labels and `after` come from the plan's checklists, and the workflow's id and title
from the compiled folder's manifest. Anything the language cannot express is a
warning naming its JSON path or file, and the result is checked by compiling it and
comparing, so nothing is dropped silently.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from todoflow.dsl import ast
from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.formatter import render
from todoflow.dsl.spans import Span, whole_file

from . import formats
from .ordering import order_tasks
from .prompt_files import PromptFile, Recovered, StepKinds, recover

NAME = re.compile(r"[a-z][a-z0-9_-]*")
_AT = ("<decompiled>", 1, 1, 1, 1)
_SPAN = Span(*_AT)
CONFIG_FIELDS = ("execution_llm", "conditional_llm", "execution_max_turns")


class Decompiled(NamedTuple):
    source: str | None  # None when the plan cannot be written as todoflow at all
    diagnostics: list[Diagnostic]
    explained: tuple[str, ...] = ()  # JSON paths the warnings already name


def decompile(
    plan: formats.Plan,
    config: formats.StepConfig | None,
    workflow_id: str,
    title: str,
    path: str,
    prompts: Mapping[tuple[str, str], PromptFile] | None = None,
) -> Decompiled:
    everyone = list(_walk(plan))
    recovered = recover([StepKinds(s.id, s.type, sub) for s, sub in everyone], prompts or {})
    writer = _Writer(config, path, [s.id for s, _ in everyone], recovered)
    steps = []
    for index, step in enumerate(plan.steps):
        following = plan.steps[index + 1].id if index + 1 < len(plan.steps) else "end"
        steps.append(writer.step(step, f"steps[{index}]", following, top=True))
    writer.leftover_configs()
    writer.found += recovered.warnings
    if not steps:
        writer.error("steps", "the plan has no steps; a workflow needs at least one")
    if writer.failed:
        return Decompiled(None, writer.found)
    members = (*writer.defaults(), *steps)
    workflow = ast.Workflow(ast.Name(workflow_id, *_AT), _text(title), members, _SPAN)
    return Decompiled(render(workflow), writer.found, tuple(writer.warned))


def _walk(plan: formats.Plan) -> Iterator[tuple[formats.PlanStep, bool]]:
    """Every step, depth first, with whether it is a sub-agent."""
    stack = [(step, False) for step in reversed(plan.steps)]
    while stack:
        step, sub = stack.pop()
        yield step, sub
        stack += [(r.sub_agent_step, True) for r in reversed(step.predefined_routes or [])]


def _text(value: str, block: bool = False) -> ast.Text:
    return ast.Text(value, *_AT, block=block and "\n" in value)


def _name(value: str) -> ast.Name:
    return ast.Name(value, *_AT)


def _prompt(kind: str, template: str) -> ast.Prompt:
    return ast.Prompt(_name(kind), _text(template, block=True), None, _SPAN)


class _Writer:
    def __init__(
        self, config: formats.StepConfig | None, path: str, step_ids: list[str], prompts: Recovered
    ) -> None:
        self.path = path
        self.configs = (
            {entry.id: (index, entry) for index, entry in enumerate(config.steps)} if config else {}
        )
        self.prompts = prompts
        self.shared = self._shared(step_ids)
        self.used: set[str] = set()
        self.found: list[Diagnostic] = []
        self.warned: list[str] = []  # JSON paths already explained
        self.failed = False

    def _shared(self, step_ids: list[str]) -> dict[str, Any]:
        """The agent settings every step has: the most common value of each."""
        shared = {}
        for field in CONFIG_FIELDS:
            entries = [self.configs.get(i) for i in step_ids]
            values = [getattr(e[1].agent_configs, field) for e in entries if e is not None]
            if step_ids and len(values) == len(step_ids) and None not in values:
                shared[field] = Counter(values).most_common(1)[0][0]
        return shared

    def defaults(self) -> list[ast.Default]:
        """The workflow's defaults: shared settings, then shared prompts."""
        items: list[ast.Default] = []
        for field in CONFIG_FIELDS:
            if field in self.shared:
                items.append(self._setting(field, self.shared[field], "the workflow's defaults"))
        items += [_prompt(kind, text) for kind, text in self.prompts.defaults.items()]
        return items

    def warn(self, where: str, message: str, file: str | None = None) -> None:
        self.found.append(
            Diagnostic("W0504", "warning", f"{where}: {message}", whole_file(file or self.path))
        )
        self.warned.append(where)

    def error(self, where: str, message: str) -> None:
        self.found.append(Diagnostic("E0505", "error", f"{where}: {message}", whole_file(self.path)))
        self.failed = True

    def name(self, value: str, where: str) -> ast.Name:
        if not NAME.fullmatch(value) or value == "end":
            self.error(
                where, f"`{value}` cannot be a todoflow name (lowercase letters, digits, `_`, `-`; not `end`)"
            )
        return _name(value)

    def step(self, step: formats.PlanStep, where: str, following: str, top: bool) -> ast.Step:
        items: list[ast.Item] = []
        for field, keyword in (("description", ast.Description), ("success_criteria", ast.Success)):
            value = getattr(step, field)
            if value == "":
                self.warn(f"{where}.{field}", "is empty; a compiled plan leaves an empty field out")
            elif value is not None:
                items.append(keyword(_text(value, block=True), _SPAN))
        if step.context_dependencies:
            items.append(ast.Needs(tuple(_text(p) for p in step.context_dependencies), _SPAN))
        elif step.context_dependencies == []:
            self.warn(f"{where}.context_dependencies", "is empty; a compiled plan leaves it out")
        if step.context_output:
            items.append(ast.Output(_text(step.context_output), _SPAN))
        for index, check in enumerate(step.validation_schema.files if step.validation_schema else []):
            if check.must_exist:
                items.append(ast.Expect(_text(check.file_name), _SPAN))
            else:
                self.warn(
                    f"{where}.validation_schema.files[{index}]", "`must_exist: false` has no todoflow form"
                )
        items += self._config(step.id)
        items += self._routes(step, where)
        items += self._checklist(step, where)
        if step.next_step_id is not None and not top:
            self.warn(
                f"{where}.next_step_id", "a sub-agent step returns to its orchestrator; `next` is left out"
            )
        elif top and step.next_step_id is None:
            self.warn(f"{where}.next_step_id", f"is missing; the compiled plan continues with `{following}`")
        elif top and step.next_step_id != following:
            target = step.next_step_id or "end"
            items.append(
                ast.Next(
                    _name(target) if target == "end" else self.name(target, f"{where}.next_step_id"), _SPAN
                )
            )
        return ast.Step(step.type, self.name(step.id, f"{where}.id"), _text(step.title), tuple(items), _SPAN)

    def _routes(self, step: formats.PlanStep, where: str) -> list[ast.Item]:
        items: list[ast.Item] = []
        if step.predefined_routes == []:
            self.warn(f"{where}.predefined_routes", "is empty; a compiled plan leaves it out")
        if step.type == "regular":
            if step.predefined_routes:
                self.warn(f"{where}.predefined_routes", "a regular step has no routes in todoflow; left out")
            if step.generic_agent is False:
                self.warn(
                    f"{where}.generic_agent", "a regular step has no generic agent in todoflow; left out"
                )
            return items
        for index, route in enumerate(step.predefined_routes or []):
            inner = self.step(
                route.sub_agent_step, f"{where}.predefined_routes[{index}].sub_agent_step", "", top=False
            )
            items.append(
                ast.Route(
                    self.name(route.route_id, f"{where}.predefined_routes[{index}].route_id"),
                    _text(route.route_name),
                    _text(route.condition, block=True),
                    inner,
                    _SPAN,
                )
            )
        if step.generic_agent is False:
            items.append(ast.Generic(False, _SPAN))
        return items

    def _checklist(self, step: formats.PlanStep, where: str) -> list[ast.Item]:
        if not step.tasks:
            return []
        if step.type == "regular":
            self.warn(f"{where}.tasks", "a regular step has no checklist in todoflow; left out")
            return []
        tasks = step.tasks
        labels = self._labels(tasks, where)
        constraints = _constraint_order(tasks)
        targeted = sorted({p for ps in constraints.values() if len(ps) < len(tasks) for p in ps})
        for index in (i for i in targeted if labels[i] is None):
            labels[index] = _fresh_label(labels, index)
            self.warn(
                f"{where}.tasks[{index}]",
                f"has no label; labelled `{labels[index]}` to attach its constraints, "
                "and the compiled plan carries that label",
            )
        entries: list[ast.Task | ast.Constraint] = []
        for index, task in enumerate(tasks):
            label = labels[index]
            after = tuple(_name(name) for name in self._after(task, labels, f"{where}.tasks[{index}]"))
            action, result = _text(task.action, block=True), _text(task.expected_result, block=True)
            entries.append(ast.Task(_name(label) if label else None, action, result, after))
        for text, positions in constraints.items():
            every = len(positions) == len(tasks)
            targets = () if every else tuple(_name(labels[p] or "") for p in positions)
            entries.append(ast.Constraint(_text(text, block=True), targets, every, _SPAN))
        for index, task in enumerate(tasks):  # compiled constraints come in block order
            expected = [text for text, positions in constraints.items() if index in positions]
            if (task.constraints or []) != expected:
                self.warn(
                    f"{where}.tasks[{index}].constraints", "their order cannot be kept; it follows first use"
                )
        return [ast.Tasks(tuple(entries), _SPAN)]

    def _labels(self, tasks: list[formats.PlanTask], where: str) -> list[str | None]:
        """The tasks' labels; one that cannot be a todoflow label, or is taken, is left out."""
        labels: list[str | None] = []
        for index, task in enumerate(tasks):
            label = task.label
            if label is not None and (
                not NAME.fullmatch(label) or label in ("end", "all") or label in labels
            ):
                reason = "is used twice" if label in labels else "cannot be a todoflow task label"
                self.warn(f"{where}.tasks[{index}].label", f"`{label}` {reason}; left out")
                label = None
            labels.append(label)
        return labels

    def _after(self, task: formats.PlanTask, labels: list[str | None], where: str) -> list[str]:
        known = []
        for name in task.after or []:
            if name in labels:
                known.append(name)
            else:
                self.warn(f"{where}.after", f"no task is labelled `{name}`; left out")
        return known

    def _config(self, step_id: str) -> list[ast.Item]:
        own = [_prompt(kind, text) for kind, text in self.prompts.own.get(step_id, {}).items()]
        if step_id not in self.configs:
            return list(own)
        self.used.add(step_id)
        entry = self.configs[step_id][1]
        items: list[ast.Item] = []
        for field in CONFIG_FIELDS:
            value = getattr(entry.agent_configs, field)
            if value is not None and self.shared.get(field) != value:
                items.append(self._setting(field, value, step_id))
        if entry.declared_execution_mode:
            items.append(ast.Mode("learn_code", _SPAN))
        return [*items, *own]

    def _setting(self, field: str, value: Any, where: str) -> ast.Llm | ast.ConditionalLlm | ast.MaxTurns:
        if field == "execution_max_turns":
            return ast.MaxTurns(value, _SPAN)
        provider = self.name(value.provider, f"{where}.{field}.provider")
        node = ast.Llm if field == "execution_llm" else ast.ConditionalLlm
        return node(provider, _text(value.model_id), _SPAN)

    def leftover_configs(self) -> None:
        for step_id, (index, _) in self.configs.items():
            if step_id not in self.used:
                self.warn(
                    f"steps[{index}]",
                    f"no step `{step_id}` in the plan "
                    "(an inner id of the legacy format? see `todoflow migrate`); "
                    "left out",
                    "step_config.json",
                )


def _fresh_label(labels: list[str | None], index: int) -> str:
    """`t<position>`, or with a suffix when the plan has that label already."""
    label, suffix = f"t{index + 1}", 1
    while label in labels:
        suffix += 1
        label = f"t{index + 1}-{suffix}"
    return label


def _constraint_order(tasks: list[formats.PlanTask]) -> dict[str, list[int]]:
    """Each distinct constraint and the tasks it is on, in an order every task's list keeps.

    Compiled constraints come in the order of the block's `constraint` entries; the
    entries are ordered so that each task's constraints read as in the plan (first
    use breaking ties), which is possible unless two tasks disagree on an order."""
    texts: list[str] = []
    for task in tasks:
        texts += [t for t in task.constraints or [] if t not in texts]
    index = {text: i for i, text in enumerate(texts)}
    needs: list[set[int]] = [set() for _ in texts]
    for task in tasks:
        listed = task.constraints or []
        for earlier, later in itertools.pairwise(listed):
            needs[index[later]].add(index[earlier])
    order = order_tasks([sorted(n) for n in needs]).order or tuple(range(len(texts)))
    return {texts[i]: [p for p, t in enumerate(tasks) if texts[i] in (t.constraints or [])] for i in order}


def compare(expected: Any, actual: Any, where: str = "") -> list[str]:
    """The JSON paths where two JSON values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            path = f"{where}.{key}" if where else key
            out += (
                compare(expected.get(key), actual.get(key), path)
                if key in expected and key in actual
                else [path]
            )
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            p
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for p in compare(e, a, f"{where}[{i}]")
        ]
    return [] if expected == actual else [where or "(the document)"]


class Names(NamedTuple):
    workflow_id: str
    title: str
    warnings: list[Diagnostic]


def workflow_names(
    plan_path: str,
    name: str,
    named_by: str,
    manifest: Mapping[str, Any] | None,
    given_id: str | None,
    given_title: str | None,
) -> Names:
    """The workflow's id and title: as given, else from the compiled folder's manifest,
    else made from `name` (a file's or folder's name, `named_by` saying which) with a
    warning each, since plan.json cannot carry them."""
    from .output import MANIFEST
    from .planfile import workflow_id_from_name

    manifest = manifest or {}
    listed_id, listed_title = manifest.get("workflow_id"), manifest.get("title")
    missing = f"{Path(plan_path).name} cannot carry it and no {MANIFEST} is beside it"
    warnings = []
    workflow_id = given_id or (listed_id if isinstance(listed_id, str) and _is_name(listed_id) else None)
    if workflow_id is None:
        workflow_id = workflow_id_from_name(name)
        message = f"the workflow id: {missing}; `{workflow_id}` is taken from {named_by} (--id sets one)"
        warnings.append(Diagnostic("W0504", "warning", message, whole_file(plan_path)))
    title = given_title or (listed_title if isinstance(listed_title, str) and listed_title else None)
    if title is None:
        title = re.sub(r"[-_]+", " ", workflow_id).capitalize()
        message = f'the workflow title: {missing}; "{title}" is made from the id (--title sets one)'
        warnings.append(Diagnostic("W0504", "warning", message, whole_file(plan_path)))
    return Names(workflow_id, title, warnings)


def _is_name(value: str) -> bool:
    return bool(NAME.fullmatch(value)) and value != "end"


def decompile_text(
    plan_text: str,
    plan_path: str,
    config_text: str | None,
    config_path: str,
    workflow_id: str,
    title: str,
    prompts: Mapping[tuple[str, str], PromptFile] | None = None,
) -> Decompiled:
    """Read the files, decompile, then compile the result and report every difference."""
    from .planfile import read_plan, read_step_config

    read = read_plan(plan_text, plan_path)
    found = list(read.diagnostics)
    config = None
    if config_text is not None:
        config, problems = read_step_config(config_text, config_path)
        found += problems
    if read.plan is None or any(d.is_error for d in found):
        return Decompiled(None, found)
    result = decompile(read.plan, config, workflow_id, title, plan_path, prompts)
    found += result.diagnostics
    if result.source is not None:
        warned = {d.span.path for d in result.diagnostics}
        given = {key: file for key, file in (prompts or {}).items() if file.shown not in warned}
        for difference in _differences(result.source, read.plan, config, given, plan_path, config_path):
            where = difference.message.split(":", 1)[0]
            if not any(
                where == known or where.startswith((f"{known}.", f"{known}[")) for known in result.explained
            ):
                found.append(difference)
    if any(d.is_error for d in found):  # nothing is written when there is any error
        return Decompiled(None, found)
    return Decompiled(result.source, found)


def _differences(
    source: str,
    plan: formats.Plan,
    config: formats.StepConfig | None,
    prompts: Mapping[tuple[str, str], PromptFile],
    plan_path: str,
    config_path: str,
) -> list[Diagnostic]:
    """Compile the decompiled source and name what does not come back as it was."""
    from todoflow.dsl.parser import parse

    from .artifacts import plan_model, step_config_model
    from .check import check

    result = check(parse(source, "<decompiled>"), source, "<decompiled>")
    checked = result.workflow
    if checked is None:  # a plan the language rejects (a `next` to no step, a cycle): say why
        return [
            Diagnostic(
                "E0505",
                "error",
                f"the decompiled source does not compile: {d.message}",
                whole_file(plan_path),
            )
            for d in result.diagnostics
            if d.is_error
        ]
    found = []
    before = plan.model_dump(mode="json", exclude_none=True, exclude={"source_sha256"})
    after = plan_model(checked).model_dump(mode="json", exclude_none=True, exclude={"source_sha256"})
    for where in compare(before, after):
        found.append(
            Diagnostic("W0504", "warning", f"{where}: does not come back the same", whole_file(plan_path))
        )
    if config is not None:
        given = {e.id: e.model_dump(mode="json", exclude_none=True) for e in config.steps}
        made = {e.id: e.model_dump(mode="json", exclude_none=True) for e in step_config_model(checked).steps}
        ids = {s.id for s in checked.all_steps()}
        for where in compare({k: v for k, v in given.items() if k in ids}, made):
            message = f"{where}: does not come back the same (workflow defaults are applied to every step)"
            found.append(Diagnostic("W0504", "warning", message, whole_file(config_path)))
    templates = {(s.id, p.kind): p.template for s in checked.all_steps() for p in s.prompts}
    for key, file in sorted(prompts.items()):
        if templates.get(key) != file.text:
            found.append(
                Diagnostic("W0504", "warning", "does not come back the same", whole_file(file.shown))
            )
    return found
