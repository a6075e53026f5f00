"""Reading plan.json and step_config.json made anywhere: checked, with diagnostics that
name the file and the JSON path (and line:column for a JSON syntax error).

Legacy nested steps are flattened on the way in (`compiler.legacy.flatten`). A field
the format does not know is reported as a warning and left out, never kept silently.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.spans import Span, whole_file

from . import formats
from .legacy import Flattened, flatten

_M = TypeVar("_M", bound=BaseModel)


class PlanFile(NamedTuple):
    plan: formats.Plan | None
    flattened: list[Flattened]
    diagnostics: list[Diagnostic]


def json_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the document)"


def load_json(text: str, path: str) -> tuple[Any, list[Diagnostic]]:
    try:
        return json.loads(text), []
    except json.JSONDecodeError as error:
        span = Span(path, error.lineno, error.colno, error.lineno, error.colno + 1)
        return None, [Diagnostic("E0501", "error", f"this is not valid JSON: {error.msg}", span)]


def read_plan(text: str, path: str) -> PlanFile:
    data, found = load_json(text, path)
    if data is None:
        return PlanFile(None, [], found)
    flat, flattened = flatten(data)
    plan, found = _validate(formats.Plan, flat, path)
    if plan is not None:
        found += _duplicate_ids(plan, path)
    return PlanFile(None if any(d.is_error for d in found) else plan, flattened, found)


def read_step_config(text: str, path: str) -> tuple[formats.StepConfig | None, list[Diagnostic]]:
    data, found = load_json(text, path)
    if data is None:
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
