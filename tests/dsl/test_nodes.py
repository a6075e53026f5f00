"""`@node` classes behave as frozen dataclasses whose layout fields do not compare."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from todoflow.dsl import ast
from todoflow.dsl.nodes import replace
from todoflow.dsl.spans import Span

HERE = Span("a.todoflow", 1, 1, 1, 4)
THERE = Span("b.todoflow", 9, 5, 9, 8)


def test_nodes_are_frozen() -> None:
    name = ast.Name("x", *HERE)
    with pytest.raises(FrozenInstanceError):
        name.value = "y"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del name.value  # type: ignore[misc]


def test_equality_and_hash_ignore_spans_and_layout() -> None:
    assert ast.Text("t", *HERE, block=True) == ast.Text("t", *THERE)
    assert hash(ast.Text("t", *HERE, block=True)) == hash(ast.Text("t", *THERE))
    assert ast.Name("x", *HERE) != ast.Name("y", *HERE)
    assert ast.Name("x", *HERE) != ast.Text("x", *HERE)


def test_defaults_and_repr() -> None:
    text = ast.Text("t", *HERE)
    assert text.block is False
    assert (
        repr(text)
        == "Text(value='t', path='a.todoflow', line=1, column=1, end_line=1, end_column=4, block=False)"
    )
    assert text.span == HERE


def test_pattern_matching_by_position() -> None:
    match ast.Next(ast.Name("end", *HERE), HERE):
        case ast.Next(ast.Name(value)):
            assert value == "end"
        case _:
            pytest.fail("no match")


def test_derived_views_of_a_node_are_computed_once() -> None:
    # `Workflow.steps` rebuilt on every call made checking quadratic in the number of steps
    step = ast.Step("regular", ast.Name("a", *HERE), ast.Text("A", *HERE), (), HERE)
    default = ast.MaxTurns(3, HERE)
    workflow = ast.Workflow(ast.Name("w", *HERE), ast.Text("W", *HERE), (default, step), HERE)
    assert workflow.steps == (step,) and workflow.steps is workflow.steps
    assert workflow.defaults == (default,) and workflow.defaults is workflow.defaults
    tasks = ast.Tasks((), HERE)
    assert tasks.tasks is tasks.tasks and tasks.constraints is tasks.constraints
    assert workflow == ast.Workflow(ast.Name("w", *THERE), ast.Text("W", *THERE), (default, step), THERE)
    assert "steps" not in repr(workflow)


def test_a_copy_changes_the_fields_asked_and_keeps_the_rest() -> None:
    step = ast.Step("regular", ast.Name("a", *HERE), ast.Text("A", *HERE), (), HERE)
    copied = replace(step, title=ast.Text("B", *HERE))
    assert copied.title.value == "B" and copied.kind == "regular" and copied.id is step.id
    assert step.title.value == "A"  # the original as it was
    assert replace(step) == step and replace(step) is not step
    assert step.__replace__(kind="todo_task").kind == "todo_task"  # the protocol of copy.replace


def test_a_copy_computes_its_own_derived_views() -> None:
    step = ast.Step("regular", ast.Name("a", *HERE), ast.Text("A", *HERE), (), HERE)
    workflow = ast.Workflow(ast.Name("w", *HERE), ast.Text("W", *HERE), (step,), HERE)
    assert workflow.steps == (step,)
    emptied = replace(workflow, members=())
    assert emptied.steps == ()  # not the view cached in the original


def test_a_copy_with_a_field_the_node_has_not_is_refused() -> None:
    name = ast.Name("a", *HERE)
    with pytest.raises(TypeError, match="Name has no field 'nmae'"):
        replace(name, nmae="b")
