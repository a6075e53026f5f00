"""The legacy nested `todo_task_step` plan format, read and migrated.

`flatten` is what every reader uses (decompile, run, serve): like the platform's
`UnmarshalJSON`, it promotes the inner step's fields where the outer step lacks them,
at every level, routes' sub-agent steps included. `migrate_plan` is the seed's
migration script, step for step, as a pure function over a copy: the same input gives
the same plan.json, byte for byte. Both report which inner step id each outer step
replaced, for step_config.json entries and learnings folders keyed by the old id.
"""

from __future__ import annotations

from typing import Any, NamedTuple

FIELDS = ("description", "success_criteria", "context_dependencies", "context_output", "validation_schema")
INNER = "todo_task_step"


class Flattened(NamedTuple):
    """A step that was nested: where it is, its outer id, the inner id it replaces, what moved."""

    path: str
    outer_id: str
    inner_id: str | None
    promoted: tuple[str, ...]


def copy_json(value: Any) -> Any:
    """A copy of a JSON value (dicts, lists, scalars): `copy.deepcopy` is 3x slower on plans."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def is_legacy(plan: Any) -> bool:
    return any(isinstance(s, dict) and s.get("type") == "todo_task" and INNER in s for s in _steps(plan))


def _steps(plan: Any) -> list[Any]:
    steps = plan.get("steps") if isinstance(plan, dict) else None
    return steps if isinstance(steps, list) else []


def _routes(step: dict[str, Any]) -> list[dict[str, Any]]:
    """A step's routes, skipping what is not a route (malformed input is reported by the
    reader's validation, not by a crash here)."""
    routes = step.get("predefined_routes")
    return [r for r in routes if isinstance(r, dict)] if isinstance(routes, list) else []


def migrate_step(step: Any, path: str, found: list[Flattened]) -> Any:
    """The seed's `migrate_step`, mutating `step` as it does, and recording what moved."""
    if not isinstance(step, dict) or step.get("type") != "todo_task":
        return step
    inner = step.get(INNER)
    if inner is None:
        return step  # already flat
    promoted = []
    for field in FIELDS:
        if not step.get(field) and isinstance(inner, dict) and field in inner:
            step[field] = inner[field]
            promoted.append(field)
    del step[INNER]
    inner_id = inner.get("id") if isinstance(inner, dict) else None
    found.append(
        Flattened(path, str(step.get("id")), inner_id if isinstance(inner_id, str) else None, tuple(promoted))
    )
    for index, route in enumerate(_routes(step)):
        if route.get("sub_agent_step"):
            where = f"{path}.predefined_routes[{index}].sub_agent_step"
            route["sub_agent_step"] = migrate_step(route["sub_agent_step"], where, found)
    return step


def migrate_plan(plan: Any) -> tuple[Any, list[Flattened]]:
    """The seed's script over a copy of `plan`: (the migrated plan, the steps it flattened)."""
    data = copy_json(plan)
    found: list[Flattened] = []
    for index, step in enumerate(_steps(data)):
        if isinstance(step, dict) and step.get("type") == "todo_task" and INNER in step:
            data["steps"][index] = migrate_step(step, f"steps[{index}]", found)
    return data, found


def flatten(plan: Any) -> tuple[Any, list[Flattened]]:
    """A copy of `plan` with nested steps flattened at every level, as readers see it."""
    data = copy_json(plan)
    found: list[Flattened] = []
    for index, step in enumerate(_steps(data)):
        data["steps"][index] = _flatten_step(step, f"steps[{index}]", found)
    return data, found


def _flatten_step(step: Any, path: str, found: list[Flattened]) -> Any:
    if not isinstance(step, dict):
        return step
    if step.get("type") == "todo_task" and INNER in step:
        step = migrate_step(step, path, found)  # promotes, and recurses into its routes
    for index, route in enumerate(_routes(step)):
        if isinstance(route.get("sub_agent_step"), dict):
            where = f"{path}.predefined_routes[{index}].sub_agent_step"
            route["sub_agent_step"] = _flatten_step(route["sub_agent_step"], where, found)
    return step
