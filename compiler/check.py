"""Check stage: AST -> `CheckedWorkflow`, collecting every diagnostic of LANGUAGE.md §6.

Each rule is a small function that returns diagnostics; `check` runs them all, then
lowers the tree into the checked model (defaults applied, `next` resolved, tasks
ordered, prompts resolved). Nothing stops at the first problem. The only I/O is
reading `prompt KIND from "file"` templates, through the `read` function given.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

from todoflow.dsl import ast
from todoflow.dsl.diagnostics import Diagnostic, Note, has_errors, sort_key
from todoflow.dsl.parser import source_sha256
from todoflow.dsl.spans import Span

from .checklist import resolve_checklist
from .model import AgentConfigs, CheckedRoute, CheckedStep, CheckedWorkflow, LlmChoice, ResolvedPrompt
from .prompts import KINDS_BY_STEP, SUB_AGENT_KIND, check_template, default_template

_T = TypeVar("_T")
ReadTemplate = Callable[[str], str]  # a path relative to the .todoflow file -> its text
TODO_ONLY = (ast.Route, ast.Generic, ast.Tasks)
SINGLE = (
    ast.Description,
    ast.Success,
    ast.Output,
    ast.Next,
    ast.Llm,
    ast.ConditionalLlm,
    ast.MaxTurns,
    ast.Mode,
    ast.Generic,
    ast.Tasks,
)


class CheckResult(NamedTuple):
    workflow: CheckedWorkflow | None  # None when there is any error
    diagnostics: tuple[Diagnostic, ...]
    templates: dict[str, str]  # template files read, by the path diagnostics name them with


class _Context(NamedTuple):
    workflow: ast.Workflow
    text: str
    path: str
    read: ReadTemplate | None
    templates: dict[str, str]


def check(workflow: ast.Workflow, text: str, path: str, read: ReadTemplate | None = None) -> CheckResult:
    """Check a parsed workflow; `text` is its source, `read` loads prompt files."""
    context = _Context(workflow, text, path, read, {})
    found: list[Diagnostic] = []
    for rule in RULES:
        found += rule(context)
    prompts, prompt_problems = _prompts(context)
    found += prompt_problems
    steps = []
    for index, step in enumerate(workflow.steps):
        lowered, problems = _lower_step(context, step, _next_of(workflow, index), prompts)
        steps.append(lowered)
        found += problems
    diagnostics = tuple(sorted(found, key=sort_key))
    if has_errors(diagnostics):
        return CheckResult(None, diagnostics, context.templates)
    checked = CheckedWorkflow(
        workflow.id.value,
        workflow.title.value,
        tuple(steps),
        path,
        source_sha256(text),
        tuple(_reachable(workflow)[0]),
        workflow.span,
    )
    return CheckResult(checked, diagnostics, context.templates)


# -- the rules ------------------------------------------------------------------------


def _all_steps(workflow: ast.Workflow) -> Iterator[tuple[ast.Step, bool]]:
    """Every step with whether it is a sub-agent (inside a route)."""
    for top in workflow.steps:
        for step in top.walk():
            yield step, step is not top


def check_has_steps(c: _Context) -> list[Diagnostic]:
    if c.workflow.steps:
        return []
    message = f"workflow `{c.workflow.id.value}` has no steps"
    return [Diagnostic("E0107", "error", message, c.workflow.id.span, "add a `regular` or `todo_task` step")]


def check_duplicate_step_ids(c: _Context) -> list[Diagnostic]:
    first: dict[str, ast.Name] = {}
    found = []
    for step, _ in _all_steps(c.workflow):
        if step.id.value in first:
            note = Note("first defined here", first[step.id.value].span)
            message = f"step id `{step.id.value}` is used twice"
            help = "every step id, inside routes too, must be unique in the workflow"
            found.append(Diagnostic("E0101", "error", message, step.id.span, help, (note,)))
        else:
            first[step.id.value] = step.id
    return found


def check_duplicate_items(c: _Context) -> list[Diagnostic]:
    found = _duplicates(c.workflow.defaults, "the workflow")
    for step, _ in _all_steps(c.workflow):
        found += _duplicates(step.items, f"step `{step.id.value}`")
    return found


def _duplicates(items: tuple[ast.Item, ...], owner: str) -> list[Diagnostic]:
    first: dict[str, ast.Item] = {}
    found = []
    for item in items:
        if isinstance(item, ast.Prompt):
            key = f"prompt {item.kind.value}"
        elif isinstance(item, SINGLE):
            key = item.keyword
        else:
            continue
        if key in first:
            note = Note("first written here", first[key].span)
            message = f"`{key}` is written twice in {owner}"
            found.append(Diagnostic("E0201", "error", message, item.span, "keep one of them", (note,)))
        else:
            first[key] = item
    return found


def check_todo_task_only_items(c: _Context) -> list[Diagnostic]:
    found = []
    for step, _ in _all_steps(c.workflow):
        if step.kind == "todo_task":
            continue
        for item in step.items:
            if isinstance(item, TODO_ONLY):
                message = f"`{item.keyword}` belongs to a `todo_task` step; `{step.id.value}` is `regular`"
                help = f"make `{step.id.value}` a `todo_task` step, or remove the `{item.keyword}`"
                found.append(Diagnostic("E0202", "error", message, item.span, help))
    return found


def check_next(c: _Context) -> list[Diagnostic]:
    top = {s.id.value for s in c.workflow.steps}
    nested = {s.id.value for s, sub in _all_steps(c.workflow) if sub}
    found = []
    for step, sub in _all_steps(c.workflow):
        for item in step.items:
            if not isinstance(item, ast.Next):
                continue
            if sub:
                message = f"step `{step.id.value}` is a sub-agent: it returns to its orchestrator"
                help = "remove the `next`; only top-level steps choose the step that follows"
                found.append(Diagnostic("E0103", "error", message, item.span, help))
            elif not item.is_end and item.target.value not in top:
                target = item.target.value
                if target in nested:
                    message = f"`next` names `{target}`, a sub-agent inside a route"
                    help = "`next` must name a top-level step or `end`"
                else:
                    message = f"`next` names `{target}`, but there is no step `{target}`"
                    help = did_you_mean(target, sorted(top)) or (
                        _known("the top-level steps are", sorted(top)) + ", or `end`"
                    )
                found.append(Diagnostic("E0102", "error", message, item.target.span, help))
    return found


def check_route_ids(c: _Context) -> list[Diagnostic]:
    found = []
    for step, _ in _all_steps(c.workflow):
        first: dict[str, ast.Route] = {}
        for item in step.items:
            if not isinstance(item, ast.Route):
                continue
            if item.id.value in first:
                note = Note("first defined here", first[item.id.value].id.span)
                message = f"route id `{item.id.value}` is used twice in step `{step.id.value}`"
                found.append(Diagnostic("E0106", "error", message, item.id.span, "rename one route", (note,)))
            else:
                first[item.id.value] = item
    return found


def check_flow(c: _Context) -> list[Diagnostic]:
    targets = {s.id.value for s in c.workflow.steps} | {"end"}
    if any(_next_of(c.workflow, i) not in targets for i in range(len(c.workflow.steps))):
        return []  # an unknown `next` is reported already; the flow is not known
    path, cycle = _reachable(c.workflow)
    reached = set(path)
    found = []
    if cycle:
        steps = {s.id.value: s for s in c.workflow.steps}
        names = ", ".join(f"`{s}`" for s in cycle)
        closing = _next_item(steps[cycle[-1]])
        span = closing.span if closing else steps[cycle[-1]].id.span
        message = f"steps {names} follow each other in a cycle that never reaches `end`"
        help = "make one of them continue with `next end` or with a step outside the cycle"
        found.append(Diagnostic("E0105", "error", message, span, help))
    for step in c.workflow.steps:
        if step.id.value not in reached:
            message = f"step `{step.id.value}` can never run: no step continues with it"
            help = "name it in a `next`, or remove it; it is left out of the machine"
            found.append(Diagnostic("W0104", "warning", message, step.id.span, help))
    return found


def _next_item(step: ast.Step) -> ast.Next | None:
    return next((i for i in step.items if isinstance(i, ast.Next)), None)


def _next_of(workflow: ast.Workflow, index: int) -> str:
    explicit = _next_item(workflow.steps[index])
    if explicit is not None:
        return explicit.target.value
    following = workflow.steps[index + 1 : index + 2]
    return following[0].id.value if following else "end"


def _reachable(workflow: ast.Workflow) -> tuple[list[str], list[str]]:
    """The top-level steps run from the first, in order; and the cycle it falls into, if any."""
    index = {s.id.value: i for i, s in enumerate(workflow.steps)}
    place: dict[str, int] = {}  # step id -> its place on the path
    current = workflow.steps[0].id.value if workflow.steps else "end"
    while current != "end" and current in index:
        if current in place:
            path = list(place)
            return path, path[place[current] :]
        place[current] = len(place)
        current = _next_of(workflow, index[current])
    return list(place), []


def check_max_turns(c: _Context) -> list[Diagnostic]:
    items = [*c.workflow.defaults, *(i for s, _ in _all_steps(c.workflow) for i in s.items)]
    return [
        Diagnostic("E0203", "error", f"`max_turns {i.value}` allows no turn", i.span, "write 1 or more")
        for i in items
        if isinstance(i, ast.MaxTurns) and i.value < 1
    ]


def check_learn_code(c: _Context) -> list[Diagnostic]:
    found = []
    for step, _ in _all_steps(c.workflow):
        mode = next((i for i in step.items if isinstance(i, ast.Mode)), None)
        if mode is not None and not any(isinstance(i, ast.Route) for i in step.items):
            message = (
                f"`mode learn_code` on step `{step.id.value}`, which has no route: the fast path never runs"
            )
            help = "the learn_code script calls sub-agents through routes; add a `route` or remove the mode"
            found.append(Diagnostic("W0204", "warning", message, mode.span, help))
    return found


def check_paths(c: _Context) -> list[Diagnostic]:
    found = []
    items = [*c.workflow.defaults, *(i for s, _ in _all_steps(c.workflow) for i in s.items)]
    for item in items:
        for text in _paths(item):
            problem = path_problem(text.value)
            if problem:
                help = "paths are relative to the workspace, like `out/report.json`"
                shown = f"`{text.value}`" if text.value and text.value.isprintable() else "this path"
                found.append(Diagnostic("E0401", "error", f"{shown} {problem}", text.span, help))
    return found


def _paths(item: ast.Item) -> tuple[ast.Text, ...]:
    if isinstance(item, ast.Needs):
        return item.paths
    if isinstance(item, ast.Output | ast.Expect):
        return (item.path,)
    if isinstance(item, ast.Prompt) and item.path is not None:
        return (item.path,)
    return ()


def did_you_mean(word: str, names: list[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def path_problem(path: str) -> str | None:
    """Why a workspace path is not acceptable, or None."""
    if not path.strip():
        return "is empty"
    if "\0" in path:
        return "holds a NUL character, which no file name can"
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        return "is an absolute path"
    if posixpath.normpath(path.replace("\\", "/")).split("/")[0] == "..":
        return "leaves the workspace"
    return None


def check_prompt_kinds(c: _Context) -> list[Diagnostic]:
    found = []
    for step, sub in _all_steps(c.workflow):
        kinds = _kinds(step, sub)
        for item in step.items:
            if isinstance(item, ast.Prompt) and item.kind.value not in kinds:
                message = f"step `{step.id.value}` never uses a `{item.kind.value}` prompt"
                help = "this step uses " + ", ".join(f"`{k}`" for k in kinds)
                found.append(Diagnostic("W0405", "warning", message, item.kind.span, help))
    return found


RULES: tuple[Callable[[_Context], list[Diagnostic]], ...] = (
    check_has_steps,
    check_duplicate_step_ids,
    check_duplicate_items,
    check_todo_task_only_items,
    check_next,
    check_route_ids,
    check_flow,
    check_max_turns,
    check_learn_code,
    check_paths,
    check_prompt_kinds,
)


def _known(what: str, names: list[str]) -> str:
    return f"{what} " + (", ".join(f"`{n}`" for n in names) if names else "none")


def _kinds(step: ast.Step, sub: bool) -> tuple[str, ...]:
    kinds = KINDS_BY_STEP[step.kind]
    return (*kinds, SUB_AGENT_KIND) if sub else kinds


# -- prompts --------------------------------------------------------------------------

_Prompts = dict[int, str]  # id() of a Prompt node -> its template text


def _prompts(c: _Context) -> tuple[_Prompts, list[Diagnostic]]:
    """Load and check every prompt item once; a broken one gets no entry."""
    texts: _Prompts = {}
    found: list[Diagnostic] = []
    items = [*c.workflow.defaults, *(i for s, _ in _all_steps(c.workflow) for i in s.items)]
    for item in items:
        if not isinstance(item, ast.Prompt):
            continue
        loaded = _load_prompt(c, item, found)
        if loaded is None:
            continue
        text, name, locate = loaded
        problems = check_template(item.kind.value, text, locate, name)
        found += problems
        if not problems:
            texts[id(item)] = text
    return texts, found


def _load_prompt(
    c: _Context, item: ast.Prompt, found: list[Diagnostic]
) -> tuple[str, str, Callable[[int], Span]] | None:
    kind = item.kind.value
    if item.template is not None:
        return item.template.value, f"the `{kind}` prompt", _inline_locator(c.text, item.template)
    assert item.path is not None
    relative = item.path.value
    if path_problem(relative) or c.read is None:
        return None
    shown = posixpath.join(posixpath.dirname(c.path), relative) if c.path != "<string>" else relative
    try:
        text = c.read(relative)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        message = f"cannot read the `{kind}` template `{relative}`: {reason}"
        help = "the path is relative to the folder of the .todoflow file"
        found.append(Diagnostic("E0404", "error", message, item.path.span, help))
        return None
    c.templates[shown] = text
    lines = text.split("\n")

    def locate(line: int) -> Span:
        width = len(lines[line - 1]) if 0 < line <= len(lines) else 0
        return Span(shown, line, 1, line, width + 1)

    return text, f"the template `{relative}`", locate


def _inline_locator(source: str, text: ast.Text) -> Callable[[int], Span]:
    """Template line -> the `.todoflow` line it was written on."""
    first = text.span.line
    if text.block:
        opening = source.split("\n")[first - 1][text.span.column + 2 :]
        first += 1 if not opening.strip() else 0
    lines = source.split("\n")

    def locate(line: int) -> Span:
        number = min(first + line - 1, text.span.end_line) if text.block else first
        width = len(lines[number - 1]) if number <= len(lines) else 0
        indent = width - len(lines[number - 1].lstrip()) if number <= len(lines) else 0
        return Span(text.span.path, number, indent + 1, number, width + 1)

    return locate


# -- lowering -------------------------------------------------------------------------


def _lower_step(
    c: _Context, step: ast.Step, next_step_id: str | None, prompts: _Prompts, sub: bool = False
) -> tuple[CheckedStep, list[Diagnostic]]:
    items = step.items
    found: list[Diagnostic] = []
    routes = []
    for route in (i for i in items if isinstance(i, ast.Route)):
        inner, problems = _lower_step(c, route.step, None, prompts, sub=True)
        found += problems
        routes.append(
            CheckedRoute(route.id.value, route.name.value, route.condition.value, inner, route.span)
        )
    tasks = None
    block = _first(items, ast.Tasks)
    if block is not None:
        tasks, problems = resolve_checklist(block, step.id.value)
        found += problems
    description, success = _first(items, ast.Description), _first(items, ast.Success)
    output, generic, mode = _first(items, ast.Output), _first(items, ast.Generic), _first(items, ast.Mode)
    checked = CheckedStep(
        step.kind,
        step.id.value,
        step.title.value,
        description.text.value if description else None,
        success.text.value if success else None,
        tuple(p.value for n in items if isinstance(n, ast.Needs) for p in n.paths),
        output.path.value if output else None,
        tuple(dict.fromkeys(e.path.value for e in items if isinstance(e, ast.Expect))),
        next_step_id,
        _agent_configs(c.workflow, items),
        mode.value if mode else None,
        tuple(routes),
        generic.enabled if generic else True,
        tasks,
        _resolve_prompts(c.workflow, step, sub, prompts),
        step.span,
    )
    return checked, found


def _first(items: tuple[ast.Item, ...], kind: type[_T]) -> _T | None:
    return next((i for i in items if isinstance(i, kind)), None)


def _agent_configs(workflow: ast.Workflow, items: tuple[ast.Item, ...]) -> AgentConfigs:
    def pick(kind: type[_T]) -> _T | None:
        return _first(items, kind) or _first(workflow.defaults, kind)

    turns, llm, conditional = pick(ast.MaxTurns), pick(ast.Llm), pick(ast.ConditionalLlm)
    return AgentConfigs(
        turns.value if turns else None,
        LlmChoice(llm.provider.value, llm.model.value) if llm else None,
        LlmChoice(conditional.provider.value, conditional.model.value) if conditional else None,
    )


def _resolve_prompts(
    workflow: ast.Workflow, step: ast.Step, sub: bool, prompts: _Prompts
) -> tuple[ResolvedPrompt, ...]:
    resolved = []
    for kind in _kinds(step, sub):
        own = next((i for i in step.items if isinstance(i, ast.Prompt) and i.kind.value == kind), None)
        default = next(
            (i for i in workflow.defaults if isinstance(i, ast.Prompt) and i.kind.value == kind), None
        )
        chosen, origin = (own, "step") if own else (default, "workflow")
        if chosen is not None and id(chosen) in prompts:
            file = chosen.path.value if chosen.path else None
            resolved.append(ResolvedPrompt(kind, prompts[id(chosen)], origin, file))  # type: ignore[arg-type]
        else:
            resolved.append(ResolvedPrompt(kind, default_template(kind), "built-in"))
    return tuple(resolved)
