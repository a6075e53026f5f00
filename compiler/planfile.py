"""Reading plan.json and step_config.json made anywhere: checked, with diagnostics that
name the file and the JSON path (and line:column for a JSON syntax error).

Legacy nested steps are flattened on the way in (`compiler.legacy.flatten`). A field
the format does not know is reported as a warning and left out, never kept silently.
JSON that Python's reader would take with a surprise is refused first, with its path:
a key written twice (the reader keeps the last), a number too long to convert, a
string holding a lone surrogate, and nesting deeper than every later stage (they
recurse over routes) can follow.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.encoding import first_surrogate
from todoflow.dsl.parser import MAX_ROUTE_DEPTH
from todoflow.dsl.spans import Span, whole_file

from . import formats
from .legacy import Flattened, flatten

_M = TypeVar("_M", bound=BaseModel)


class PlanFile(NamedTuple):
    plan: formats.Plan | None
    flattened: list[Flattened]
    diagnostics: list[Diagnostic]
    data: Any = None  # the JSON as read, before flattening (when it could be read)


def workflow_id_from_name(name: str) -> str:
    """A workflow id made from a file or folder name: lowercase, every run of other
    characters one `-`, and `w-` before it unless it starts with a letter (`end` too:
    it is never a name)."""
    words = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    if not words:
        return "workflow"
    return words if words[0].isalpha() and words != "end" else f"w-{words}"


def json_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the document)"


MAX_JSON_DEPTH = 128  # a plan whose routes nest MAX_ROUTE_DEPTH deep needs about 100
MAX_DIGITS = 4300  # Python's own limit for turning digits into an int


class _Repeated(dict[str, Any]):
    """A JSON object in which some key was written more than once."""

    repeated: list[str]


class _LongNumber(NamedTuple):
    digits: int


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    repeated = _Repeated(value)
    counts = Counter(key for key, _ in pairs)
    repeated.repeated = [key for key, count in counts.items() if count > 1]
    return repeated


# a lone surrogate reaches a JSON value through an escape (or a `str` given directly)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def load_json(text: str, path: str) -> tuple[Any, list[Diagnostic]]:
    """The JSON value of `text` and no diagnostic, or None and why it cannot be read
    (`null` is a value like any other: check the diagnostics, not the value)."""
    odd: list[bool] = []  # set when a hook met something the walk must name

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        value = _object(items)
        if type(value) is _Repeated:
            odd.append(True)
        return value

    def integer(digits: str) -> int | _LongNumber:
        if len(digits.lstrip("-")) <= MAX_DIGITS:
            return int(digits)
        odd.append(True)
        return _LongNumber(len(digits.lstrip("-")))

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_int=integer)
    except json.JSONDecodeError as error:
        span = Span(path, error.lineno, error.colno, error.lineno, error.colno + 1)
        return None, [Diagnostic("E0501", "error", f"this is not valid JSON: {error.msg}", span)]
    except RecursionError:  # the standard reader recurses once per level
        return None, [_beyond("(the document)", f"nests more than {MAX_JSON_DEPTH} levels deep", path)]
    if not odd and not _SURROGATE_ESCAPE.search(text) and first_surrogate(text) is None:
        found = [] if _depth(data) <= MAX_JSON_DEPTH else [_too_deep(path)]
    else:
        found = _unreadable(data, path)
    return (None, found) if found else (data, [])


def _depth(data: Any) -> int:
    """How deep containers nest in `data` (a stack, no recursion)."""
    if not isinstance(data, dict | list):
        return 0
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        items = value.values() if isinstance(value, dict) else value
        stack += [(item, depth + 1) for item in items if isinstance(item, dict | list)]
    return deepest


def _too_deep(path: str) -> Diagnostic:
    return _beyond("(the document)", f"nests more than {MAX_JSON_DEPTH} levels deep", path)


def _beyond(where: str, message: str, path: str) -> Diagnostic:
    return Diagnostic("E0507", "error", f"{where}: {message}", whole_file(path))


def _unreadable(data: Any, path: str) -> list[Diagnostic]:
    """Keys written twice, numbers too long, lone surrogates, too deep: walked with a
    stack, in document order, each named by its JSON path."""
    found = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        if len(loc) >= MAX_JSON_DEPTH and isinstance(value, dict | list):
            return [_too_deep(path)]
        if isinstance(value, _Repeated):
            for key in value.repeated:
                message = (
                    f"{json_path(loc)}: the key `{key}` is written twice; "
                    "readers disagree on which one counts"
                )
                found.append(Diagnostic("E0506", "error", message, whole_file(path)))
        if isinstance(value, dict):
            for key in value:
                if first_surrogate(key) is not None:
                    found.append(_beyond(json_path(loc), _surrogate_message(key), path))
            stack += [(value[key], (*loc, key)) for key in reversed(value)]
        elif isinstance(value, list):
            stack += [(item, (*loc, index)) for index, item in reversed(list(enumerate(value)))]
        elif isinstance(value, _LongNumber):
            message = f"a number of {value.digits:,} digits; at most {MAX_DIGITS:,}"
            found.append(_beyond(json_path(loc), message, path))
        elif isinstance(value, str) and first_surrogate(value) is not None:
            found.append(_beyond(json_path(loc), _surrogate_message(value), path))
    return found


def _surrogate_message(text: str) -> str:
    at = first_surrogate(text)
    assert at is not None
    return f"holds a lone surrogate (`\\u{ord(text[at]):04x}`), which is not a character"


def _route_depth(data: Any, path: str) -> list[Diagnostic]:
    """An error for each top-level step whose routes nest deeper than the language allows."""
    found = []
    steps = data.get("steps") if isinstance(data, dict) else None
    for index, top in enumerate(steps if isinstance(steps, list) else []):
        deepest, stack = 0, [(top, 0)]
        while stack:
            step, depth = stack.pop()
            deepest = max(deepest, depth)
            routes = step.get("predefined_routes") if isinstance(step, dict) else None
            for route in routes if isinstance(routes, list) else []:
                if isinstance(route, dict):
                    stack.append((route.get("sub_agent_step"), depth + 1))
        if deepest > MAX_ROUTE_DEPTH:
            message = f"routes nest {deepest} deep; at most {MAX_ROUTE_DEPTH}"
            found.append(_beyond(f"steps[{index}]", message, path))
    return found


def read_plan(text: str, path: str) -> PlanFile:
    data, found = load_json(text, path)
    if found:
        return PlanFile(None, [], found)
    found = _route_depth(data, path)
    if found:
        return PlanFile(None, [], found)
    flat, flattened = flatten(data)
    plan, found = _validate(formats.Plan, flat, path)
    if plan is not None:
        found += _duplicate_ids(plan, path)
    return PlanFile(None if any(d.is_error for d in found) else plan, flattened, found, data)


def read_step_config(text: str, path: str) -> tuple[formats.StepConfig | None, list[Diagnostic]]:
    data, found = load_json(text, path)
    if found:
        return None, found
    return _validate(formats.StepConfig, data, path)


def _validate(model: type[_M], data: Any, path: str) -> tuple[_M | None, list[Diagnostic]]:
    """Validate, turning unknown fields into warnings (and dropping them) and the rest into errors."""
    found: list[Diagnostic] = []
    for _ in range(100):
        try:
            return model.model_validate(data), found
        except ValidationError as error:
            errors = error.errors(include_url=False)
            extras = [e for e in errors if e["type"] == "extra_forbidden"]
            if len(extras) < len(errors):
                return None, found + [_error(e, path) for e in errors if e["type"] != "extra_forbidden"]
            for extra in extras:
                where = json_path(extra["loc"])
                message = f"{where}: the field `{extra['loc'][-1]}` is not part of the format; it is left out"
                found.append(Diagnostic("W0504", "warning", message, whole_file(path)))
                _drop(data, extra["loc"])
    return None, found


def _error(error: Any, path: str) -> Diagnostic:
    where = json_path(error["loc"])
    kind = error["type"]
    if kind == "missing":
        message = f"{where}: is missing"
    elif kind == "literal_error":
        message = f"{where}: must be {error['ctx']['expected']}, not {json.dumps(error.get('input'))}"
    else:
        message = f"{where}: {error['msg'][:1].lower()}{error['msg'][1:]}"
    return Diagnostic("E0502", "error", message, whole_file(path))


def _drop(data: Any, loc: tuple[Any, ...]) -> None:
    for part in loc[:-1]:
        data = data[part]
    del data[loc[-1]]


def _duplicate_ids(plan: formats.Plan, path: str) -> list[Diagnostic]:
    seen: dict[str, str] = {}
    found = []

    def visit(step: formats.PlanStep, where: str) -> None:
        if step.id in seen:
            message = f"{where}.id: the step id `{step.id}` is used twice (first at {seen[step.id]})"
            found.append(Diagnostic("E0503", "error", message, whole_file(path)))
        else:
            seen[step.id] = where
        for index, route in enumerate(step.predefined_routes or []):
            visit(route.sub_agent_step, f"{where}.predefined_routes[{index}].sub_agent_step")

    for index, step in enumerate(plan.steps):
        visit(step, f"steps[{index}]")
    return found
