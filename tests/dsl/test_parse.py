"""The AST: what each construct becomes, with spans pointing at the source."""

from __future__ import annotations

import pytest

from todoflow import TodoflowError, parse, try_parse
from todoflow.dsl import ast

from ..conftest import FIXTURES

SOURCE = """\
workflow release "Release" {
    llm vertex "gemini-2.5-pro"
    todo_task ship "Ship it" {
        needs "a.json", "b.json"
        needs "c.json"
        next end
        tasks {
            tag: "Tag" => "tagged" after build
            build: "Build" => "built"
            constraint "Never push to main" on build, tag
            constraint "Be careful" on all
        }
    }
}
"""


def test_workflow_members_keep_source_order_and_kinds() -> None:
    workflow = parse(SOURCE, "release.todoflow")
    assert workflow.id.value == "release"
    assert workflow.title.value == "Release"
    assert [type(m).__name__ for m in workflow.members] == ["Llm", "Step"]
    (step,) = workflow.steps
    assert step.kind == "todo_task"
    assert [type(i).__name__ for i in step.items] == ["Needs", "Needs", "Next", "Tasks"]


def test_spans_point_at_the_source() -> None:
    workflow = parse(SOURCE, "release.todoflow")
    step = workflow.steps[0]
    assert (step.span.line, step.span.column, step.span.end_line, step.span.end_column) == (3, 5, 13, 6)
    assert (step.id.span.line, step.id.span.column, step.id.span.end_column) == (3, 15, 19)
    tasks = step.items[3]
    assert isinstance(tasks, ast.Tasks)
    tag = tasks.tasks[0]
    assert tag.after[0].span.line == 8 and tag.after[0].span.column == 42
    assert tag.span.path == "release.todoflow"


def test_tasks_and_constraints() -> None:
    tasks = parse(SOURCE).steps[0].items[3]
    assert isinstance(tasks, ast.Tasks)
    tag, build = tasks.tasks
    assert tag.label is not None and tag.label.value == "tag"
    assert (tag.action.value, tag.expected.value) == ("Tag", "tagged")
    assert [a.value for a in tag.after] == ["build"]
    assert build.after == ()
    first, second = tasks.constraints
    assert [t.value for t in first.targets] == ["build", "tag"] and not first.on_all
    assert second.on_all and second.targets == ()


def test_next_end_is_the_end_of_the_workflow() -> None:
    nxt = parse(SOURCE).steps[0].items[2]
    assert isinstance(nxt, ast.Next) and nxt.is_end


def test_keywords_are_contextual() -> None:
    workflow = parse((FIXTURES / "valid" / "contextual-keywords.todoflow").read_text())
    assert workflow.id.value == "tasks"
    build, wf_step = workflow.steps
    route = build.items[0]
    assert isinstance(route, ast.Route) and route.id.value == "regular"
    assert route.step.id.value == "tasks"
    tasks = build.items[1]
    assert isinstance(tasks, ast.Tasks)
    assert [t.label.value for t in tasks.tasks if t.label] == ["after", "description"]
    assert [a.value for a in tasks.tasks[1].after] == ["after"]
    assert wf_step.id.value == "workflow"


def test_keyword_is_a_whole_word() -> None:
    result = try_parse('workflow w "W" { prompt worker "x" }')
    assert [d.message for d in result.diagnostics] == [
        "expected a prompt kind (`orchestrator_system`, `orchestrator_user`, `intake`, `work`, "
        "`revise` or `sub_agent`) after `prompt`, found `worker`"
    ]


def test_block_strings_are_dedented() -> None:
    workflow = parse((FIXTURES / "valid" / "strings.todoflow").read_text())
    step = workflow.steps[0]
    description = step.items[0]
    assert isinstance(description, ast.Description)
    assert description.text.block
    assert description.text.value == (
        "Block strings drop the first and last line breaks,\n"
        "  keep indentation relative to the least indented line,\n"
        "\n"
        'keep blank lines, and still read escapes: """ and \t.'
    )
    success = step.items[1]
    assert isinstance(success, ast.Success) and success.text.value == "One line in a block"


def test_escapes_in_plain_strings() -> None:
    workflow = parse((FIXTURES / "valid" / "strings.todoflow").read_text())
    assert workflow.title.value == 'Strings "quoted" and escaped'
    assert workflow.steps[0].title.value == "Tab\there, newline\nthere, \\ backslash, \u00e9 accent"


def test_routes_nest_steps_at_any_depth() -> None:
    workflow = parse((FIXTURES / "valid" / "all-items.todoflow").read_text())
    assert [s.id.value for s in workflow.steps[0].walk()] == ["main", "nested", "leaf"]


def test_prompt_inline_and_from_file() -> None:
    workflow = parse((FIXTURES / "valid" / "all-items.todoflow").read_text())
    inline, from_file = workflow.defaults[3], workflow.defaults[4]
    assert isinstance(inline, ast.Prompt) and isinstance(from_file, ast.Prompt)
    assert inline.kind.value == "orchestrator_system" and inline.template is not None
    assert from_file.path is not None and from_file.path.value == "prompts/user.j2"
    assert from_file.template is None


def test_parse_raises_with_every_diagnostic_rendered() -> None:
    with pytest.raises(TodoflowError) as caught:
        parse('workflow w "W" {\n    regular a "A" {\n        sucess "x"\n    }\n', "w.todoflow")
    error = caught.value
    assert [d.code for d in error.diagnostics] == ["E0002", "E0001"]
    assert "w.todoflow:3:9: error[E0001]" in str(error)
    assert "did you mean `success`?" in str(error)


def test_try_parse_returns_none_and_diagnostics() -> None:
    workflow, diagnostics = try_parse("workflow", "x.todoflow")
    assert workflow is None
    assert diagnostics[0].span.path == "x.todoflow"


def test_crlf_and_byte_order_mark_are_accepted() -> None:
    text = '\ufeffworkflow w "W" {\r\n    regular a "A" {\r\n    }\r\n}\r\n'
    assert parse(text).steps[0].span.line == 2


def test_comments_are_collected_in_order() -> None:
    workflow = parse('# one\nworkflow w "W" {  # two\n}\n# three\n')
    assert [(c.text, c.trailing) for c in workflow.comments] == [
        ("# one", False),
        ("# two", True),
        ("# three", False),
    ]


def test_trees_equal_ignoring_layout() -> None:
    compact = parse('workflow w "W" { regular a "A" { description "d" } }')
    spread = parse('workflow w\n"W"\n{\n  regular a "A" {\n    description """\n      d\n      """\n  }\n}\n')
    assert compact == spread
