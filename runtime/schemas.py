"""JSON Schemas of the replies, as tools show them to a model: the MCP server's tools and
the LLM agent's tools are generated from the very models the engine validates with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def model_properties(model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
    """A model's properties as a tool's input schema shows them: references inlined, no
    titles, a description on the property itself (not inside an `anyOf` branch)."""
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})
    found = {name: clean(value, definitions) for name, value in schema["properties"].items()}
    return found, list(schema.get("required", []))


def clean(value: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        if "$ref" in value:
            value = {
                **definitions[value["$ref"].rsplit("/", 1)[-1]],
                **{k: v for k, v in value.items() if k != "$ref"},
            }
        out = {k: clean(v, definitions) for k, v in value.items() if k not in ("title", "$defs")}
        for branch in out.get("anyOf", []):  # hoist a branch's description to the property
            if isinstance(branch, dict) and "description" in branch:
                out.setdefault("description", branch.pop("description"))
        return out
    if isinstance(value, list):
        return [clean(item, definitions) for item in value]
    return value
