"""Prompt templates: the kinds, the context each kind is rendered with, the built-in
defaults, and the compile-time check of a template against its kind's context.

Templates are Jinja, rendered at run time in a `SandboxedEnvironment` with
`StrictUndefined`; here they are only parsed, so an unknown variable is reported
when the workflow is compiled rather than when an agent is waiting. The contexts
are documented in docs/prompts.md, and that page is checked against this module.

The sandbox (`environment()`, shared with the runtime) renders a template alone: it
loads no other template, and `range` and `**` are bounded. What it refuses raises a
Jinja `TemplateError`, and what can be seen in a template's text is reported at
compile time instead (E0406).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    "reply": ("confirm", "evidence", "summary", "give_back"),
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
        "reply": "reply",
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
        "todo_id": "str",
        "instructions": "str",
        "success_criteria": "str",
        "limits": "limits",
        "learnings": "list of learning",
        "reply": "reply",
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


MAX_RANGE = 10_000  # items a template's `range` may make (a checklist holds at most 100 tasks)
MAX_EXPONENT = 64  # `a ** b` is refused for a larger `b`: the result could fill the memory
MAX_REPEAT = 1_000_000  # items or characters `text * n` may make (a prompt holds at most this)
_DICT_NAMES = frozenset(dir(dict))
_LOADING_TAGS = {"Include": "include", "Import": "import", "FromImport": "import", "Extends": "extends"}


def environment() -> SandboxedEnvironment:
    """The sandbox every prompt is parsed and rendered in."""
    from jinja2 import StrictUndefined

    return _sandbox()(
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        loader=_loader()(),
    )


@cache
def _sandbox() -> type[SandboxedEnvironment]:
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import SandboxedEnvironment

    class Sandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"**", "*"})

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.globals["range"] = bounded_range

        def getattr(self, obj: Any, attribute: str) -> Any:
            # A template's records are dicts, so `task.action` is `task["action"]`: what the
            # sandbox reads once `getattr` has failed, read without raising that failure
            # first (a third of a step's prompt). dict's own names (`items`) go the usual way.
            if type(obj) is dict and attribute not in _DICT_NAMES:
                try:
                    return obj[attribute]
                except KeyError:
                    pass
            return super().getattr(obj, attribute)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "*" and _repeated(left, right) > MAX_REPEAT:
                raise SecurityError(
                    f"a repetition of {_repeated(left, right):,} items; at most {MAX_REPEAT:,}"
                )
            if operator == "**" and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
                raise SecurityError(f"`** {right}`: an exponent of at most {MAX_EXPONENT}")
            try:
                return super().call_binop(context, operator, left, right)
            except ArithmeticError as error:  # a float overflow, a zero to a negative power
                raise SecurityError(f"`{left!r} ** {right!r}` cannot be computed: {error}") from None

    return Sandbox


def _repeated(left: Any, right: Any) -> int:
    """How many items `left * right` makes when it repeats a sequence (0 for numbers)."""
    for sequence, count in ((left, right), (right, left)):
        if (
            isinstance(sequence, str | list | tuple)
            and isinstance(count, int)
            and not isinstance(count, bool)
        ):
            return len(sequence) * max(count, 0)
    return 0


@cache
def _loader() -> type[Any]:
    from jinja2 import BaseLoader, TemplateNotFound

    class NoTemplates(BaseLoader):
        """Prompts are rendered alone: `include`, `import` and `extends` find nothing."""

        def get_source(self, environment: Any, template: str) -> Any:
            raise TemplateNotFound(template, f"`{template}`: a prompt cannot load another template")

    return NoTemplates


def bounded_range(*args: int) -> range:
    """`range`, refusing more than `MAX_RANGE` items with a Jinja `SecurityError`."""
    from jinja2.exceptions import SecurityError

    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise SecurityError(f"a range of {len(numbers):,} items; at most {MAX_RANGE:,}")
    return numbers


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
    from jinja2 import TemplateSyntaxError

    try:
        return _tree_problems(kind, environment().parse(text))
    except TemplateSyntaxError as error:
        return ((error.lineno, "E0402", f"{{name}} does not parse: {error.message}", _SYNTAX_HELP),)
    except RecursionError:  # Jinja's parser and tree walks recurse once per level of nesting
        return ((1, "E0402", "{name} does not parse: it nests too deep", _SYNTAX_HELP),)


def _tree_problems(kind: str, tree: nodes.Template) -> tuple[tuple[int, str, str, str], ...]:
    from jinja2 import meta

    context = CONTEXTS[kind]
    known = ", ".join(f"`{v}`" for v in context)
    found = list(_unrenderable(tree))
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


_LOADING_HELP = "a prompt is rendered alone; write the text it would load into the template itself"
_RANGE_HELP = f"a template's `range` makes at most {MAX_RANGE:,} items"


def _unrenderable(tree: nodes.Template) -> Iterator[tuple[int, str, str, str]]:
    """What the sandbox would refuse at run time, where the template's text shows it."""
    from jinja2 import nodes

    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        tag = _LOADING_TAGS[type(node).__name__]
        message = f"{{name}} uses `{{% {tag} %}}`, but prompts cannot load other templates"
        yield node.lineno, "E0406", message, _LOADING_HELP
    for call in tree.find_all(nodes.Call):
        if not (isinstance(call.node, nodes.Name) and call.node.name == "range"):
            continue
        bounds = [_constant(arg) for arg in call.args]
        if call.args and len(call.args) <= 3 and all(b is not None for b in bounds):
            size = _range_size(bounds)  # type: ignore[arg-type]
            if size > MAX_RANGE:
                message = f"{{name}} asks for a range of {size:,} items; at most {MAX_RANGE:,}"
                yield call.lineno, "E0406", message, _RANGE_HELP


def _range_size(bounds: list[int]) -> int:
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds[:2], (bounds[2:] or [1])[0])
    if step == 0:
        return 0
    return max(0, (stop - start + step - (1 if step > 0 else -1)) // step)


_LIMIT = 10**30  # constant arithmetic in templates is folded only below this


def _constant(node: Any) -> int | None:
    """The value of an integer expression made of literals, or None; without computing
    anything huge (`10**10**10` is just "too large": the limit)."""
    from jinja2 import nodes

    if isinstance(node, nodes.Const):
        value = node.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, nodes.Neg):
        inner = _constant(node.node)
        return None if inner is None else -inner
    operations = {nodes.Add: int.__add__, nodes.Sub: int.__sub__, nodes.Mul: int.__mul__}
    if isinstance(node, nodes.Pow | nodes.Add | nodes.Sub | nodes.Mul):
        left, right = _constant(node.left), _constant(node.right)
        if left is None or right is None:
            return None
        if isinstance(node, nodes.Pow):
            if right < 0:
                return None
            if abs(left) > 1 and right > _LIMIT.bit_length():
                return _LIMIT
            value = int(left**right)
        else:
            value = operations[type(node)](left, right)
        return max(-_LIMIT, min(_LIMIT, value))
    return None


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
