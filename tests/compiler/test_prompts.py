"""Prompt kinds: the documented contexts are the checked ones, and every built-in
template checks clean and renders with its context."""

from __future__ import annotations

import re
from typing import Any

import pytest

from todoflow.compiler.prompts import (
    CONTEXTS,
    KINDS_BY_STEP,
    RECORDS,
    check_template,
    default_template,
    environment,
)
from todoflow.dsl.ast import PROMPT_KINDS
from todoflow.dsl.spans import Span
from todoflow.runtime.directive import MCP_STEP

from ..conftest import ROOT

DOC = (ROOT / "docs" / "prompts.md").read_text()


def _locate(line: int) -> Span:
    return Span("template", line, 1, line, 2)


def test_docs_list_each_kind_with_its_variables() -> None:
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ((?:`\w+`(?:, )?)+) \|$", DOC, re.M)
    documented = {kind: re.findall(r"`(\w+)`", variables) for kind, variables in rows}
    assert documented == {kind: list(context) for kind, context in CONTEXTS.items()}
    assert set(CONTEXTS) == set(PROMPT_KINDS)


def test_docs_list_each_record_with_its_fields() -> None:
    for record, fields in RECORDS.items():
        row = next(line for line in DOC.splitlines() if line.startswith(f"| `{record}` |"))
        assert re.findall(r"`(\w+)`", row.split("|")[2]) == list(fields)


def _sample(kind: str) -> dict[str, Any]:
    task = {
        "position": 1,
        "action": "Tag",
        "expected_result": "tagged",
        "constraints": ["careful"],
        "done": False,
    }
    step = {
        "id": "ship",
        "title": "Ship",
        "kind": "todo_task",
        "description": "Ship it",
        "success_criteria": "shipped",
        "context_dependencies": [],
        "context_output": "out.json",
        "expected_files": ["out.json"],
        "routes": [{"id": "build", "name": "Build", "condition": "to build", "step_id": "builder"}],
        "generic_agent": True,
    }
    values = {
        "workflow": {"id": "release", "title": "Release"},
        "step": step,
        "limits": {"max_tasks": 100, "max_text": 1000, "max_evidence": 500, "max_instructions": 4000},
        "tasks": [task],
        "ready_tasks": [task],
        "task": task,
        "position": 1,
        "total": 1,
        "route": step["routes"][0],
        "instructions": "Build the wheel",
        "success_criteria": "dist/ has it",
        "todo_id": "todo_1",
        "turns": {"used": 3, "allowed": 10},
        "last_delegation": {"todo_id": "todo_1", "agent": "build", "passed": False, "reason": "no dist/"},
        "reply": MCP_STEP._asdict(),
        "learnings": [
            {
                "id": "p:4",
                "at": "2026-01-01T00:00:00.000Z",
                "instructions": "Build it",
                "success_criteria": None,
                "evidence": "built",
                "outcome": "dist/ holds the wheel",
                "files": ["dist/x.whl"],
            }
        ],
    }
    return {name: values[name] for name in CONTEXTS[kind]}


@pytest.mark.parametrize("kind", list(CONTEXTS))
def test_builtin_template_checks_and_renders(kind: str) -> None:
    template = default_template(kind)
    assert check_template(kind, template, _locate, kind) == []
    rendered = environment().from_string(template).render(**_sample(kind))
    assert rendered.strip()
    assert "{{" not in rendered


def test_every_kind_is_used_by_some_step() -> None:
    used = {k for kinds in KINDS_BY_STEP.values() for k in kinds} | {"sub_agent"}
    assert used == set(PROMPT_KINDS)


def test_unknown_variable_and_attribute_are_reported_at_their_lines() -> None:
    problems = check_template("work", "ok {{ task.action }}\n{{ tsk }}\n{{ step.name }}", _locate, "t")
    assert [(d.code, d.span.line) for d in problems] == [("E0403", 2), ("E0403", 3)]


def test_template_locals_and_jinja_globals_are_allowed() -> None:
    template = "{% set n = total %}{% for i in range(n) %}{{ loop.index }}{% endfor %}"
    assert check_template("work", template, _locate, "t") == []


def test_syntax_error_reports_its_line() -> None:
    (problem,) = check_template("work", "line one\n{% if %}", _locate, "the template")
    assert (problem.code, problem.span.line) == ("E0402", 2)
    assert problem.message.startswith("the template does not parse:")


def test_a_record_s_fields_read_as_attributes_and_dict_s_own_names_stay_its_methods() -> None:
    """Records are dicts read through a shortcut of the sandbox's `getattr`: the same
    values as the sandbox gives, a missing field still undefined."""
    import jinja2

    record = {"action": "Tag", "items": "a field named like a method", "keys": 2}
    render = environment().from_string("{{ task.action }} {{ task['items'] }} {{ task.items()|list|length }}")
    assert render.render(task=record) == "Tag a field named like a method 3"
    with pytest.raises(jinja2.UndefinedError, match="has no attribute 'missing'"):
        environment().from_string("{{ task.missing }}").render(task=record)
