"""Prompt templates: the kinds, the context each kind is rendered with, the built-in
defaults, and the compile-time check of a template against its kind's context.

Templates are Jinja, rendered at run time in a `SandboxedEnvironment` with
`StrictUndefined`; here they are only parsed, so an unknown variable is reported
when the workflow is compiled rather than when an agent is waiting. The contexts
are documented in docs/prompts.md, and that page is checked against this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.spans import Span

if TYPE_CHECKING:  # Jinja is imported only when a template is checked or rendered
    from jinja2 import nodes
    from jinja2.sandbox import SandboxedEnvironment

TEMPLATES = Path(__file__).with_name("templates")

# The records a context may hold, and their fields.
RECORDS: Mapping[str, tuple[str, ...]] = {
    "workflow": ("id", "title"),
    "step": (
        "id",
        "title",
        "kind",
        "description",
        "success_criteria",
        "context_dependencies",
        "context_output",
        "expected_files",
        "routes",
        "generic_agent",
    ),
    "task": ("position", "action", "expected_result", "constraints", "done"),
    "route": ("id", "name", "condition", "step_id"),
    "limits": ("max_tasks", "max_text", "max_evidence", "max_instructions"),
    "turns": ("used", "allowed"),
    "delegation": ("todo_id", "agent", "passed", "reason"),
    "learning": ("id", "at", "instructions", "success_criteria", "evidence", "outcome", "files"),
}
# What the runtime adds to the context of every kind an orchestrator's turn renders.
_TURN = {"todo_id": "str", "turns": "turns", "last_delegation": "delegation"}

# Each kind's context: variable -> what it holds (the record name, or a description).
CONTEXTS: Mapping[str, Mapping[str, str]] = {
    "orchestrator_system": {"workflow": "workflow", "step": "step", "limits": "limits"},
    "orchestrator_user": {
        "workflow": "workflow",
        "step": "step",
        "tasks": "list of task",
        "position": "int",
        "total": "int",
        "limits": "limits",
        "task": "task",
        **_TURN,
    },
    "intake": {"workflow": "workflow", "step": "step", "ready_tasks": "list of task", "limits": "limits"},
    "work": {
        "workflow": "workflow",
        "step": "step",
        "task": "task",
        "position": "int",
        "total": "int",
        "limits": "limits",
        **_TURN,
    },
    "revise": {
        "workflow": "workflow",
        "step": "step",
        "tasks": "list of task",
        "position": "int",
        "total": "int",
        "limits": "limits",
    },
    "sub_agent": {
        "workflow": "workflow",
        "step": "step",
        "route": "route",
        "instructions": "str",
        "success_criteria": "str",
        "limits": "limits",
        "learnings": "list of learning",
    },
}

KINDS_BY_STEP: Mapping[str, tuple[str, ...]] = {
    "todo_task": ("orchestrator_system", "orchestrator_user", "intake", "work", "revise"),
    "regular": ("work",),
}
SUB_AGENT_KIND = "sub_agent"

# Names Jinja itself provides to every template.
_JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop", "self"})

Locate = Callable[[int], Span]


def environment() -> SandboxedEnvironment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)


@cache
def default_template(kind: str) -> str:
    return (TEMPLATES / f"{kind}.j2").read_text(encoding="utf-8")


def check_template(kind: str, text: str, locate: Locate, name: str) -> list[Diagnostic]:
    """Parse `text` and check every variable it reads against `kind`'s context.

    `locate(line)` turns a template line into a span (in the template file, or in the
    `.todoflow` source for an inline template); `name` names the template in messages.
    """
    return [
        Diagnostic(code, "error", message.replace("{name}", name), locate(line), help)
        for line, code, message, help in _problems(kind, text)
    ]


@cache
def _problems(kind: str, text: str) -> tuple[tuple[int, str, str, str], ...]:
    """(template line, code, message, help) for each problem; cached per distinct template."""
    from jinja2 import TemplateSyntaxError, meta

    try:
        tree = environment().parse(text)
    except TemplateSyntaxError as error:
        return ((error.lineno, "E0402", f"{{name}} does not parse: {error.message}", _SYNTAX_HELP),)
    context = CONTEXTS[kind]
    known = ", ".join(f"`{v}`" for v in context)
    found = []
    free = meta.find_undeclared_variables(tree)
    for variable in sorted(free - set(context) - _JINJA_GLOBALS):
        line = _first_line(tree, variable)
        message = f"{{name}} uses `{variable}`, which a `{kind}` prompt does not provide"
        found.append((line, "E0403", message, f"a `{kind}` prompt can use {known}"))
    for variable, attribute, line in _attributes(tree):
        fields_of = RECORDS.get(context.get(variable, ""))
        if variable in free and fields_of is not None and attribute not in fields_of:
            fields = ", ".join(f"`{f}`" for f in fields_of)
            message = f"{{name}} uses `{variable}.{attribute}`, but `{variable}` has no `{attribute}`"
            found.append((line, "E0403", message, f"`{variable}` has {fields}"))
    return tuple(sorted(found))


_SYNTAX_HELP = (
    "templates are Jinja: `{{ value }}` for values, `{% if %}`/`{% for %}` ... `{% end... %}` for logic"
)


def _first_line(tree: nodes.Template, variable: str) -> int:
    from jinja2 import nodes

    lines = [n.lineno for n in tree.find_all(nodes.Name) if n.name == variable and n.ctx == "load"]
    return min(lines, default=1)


def _attributes(tree: nodes.Template) -> Iterator[tuple[str, str, int]]:
    from jinja2 import nodes

    for attribute in tree.find_all(nodes.Getattr):
        if isinstance(attribute.node, nodes.Name):
            yield attribute.node.name, attribute.attr, attribute.lineno
    for item in tree.find_all(nodes.Getitem):
        key = item.arg
        if isinstance(item.node, nodes.Name) and isinstance(key, nodes.Const) and isinstance(key.value, str):
            yield item.node.name, key.value, item.lineno
