"""Hostile input gets diagnostics, never a traceback: deep nesting, text that is not
Unicode, NULs in paths, templates that cannot render, JSON todoflow does not read
(a key written twice, a 5,000-digit number, a lone surrogate, nesting 1,000 deep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jinja2 import TemplateError

import todoflow
from todoflow.compiler.analysis import analyze, analyze_file
from todoflow.compiler.decompile import decompile_text
from todoflow.compiler.prompts import environment
from todoflow.dsl import try_parse
from todoflow.dsl.formatter import format_source

from ..conftest import run_cli
from ..support.runtime_helpers import folder_digest


def nested_source(depth: int) -> str:
    """A workflow whose routes nest `depth` deep."""
    head = [f'{"    " * (2 * i + 1)}todo_task s{i} "S" {{ route r{i} "R" when "c" {{' for i in range(depth)]
    tail = [f"{'    ' * (2 * i + 1)}}} }}" for i in reversed(range(depth))]
    leaf = "    " * (2 * depth + 1) + 'regular leaf "L" { }'
    return "\n".join(['workflow w "W" {', *head, leaf, *tail, "}"]) + "\n"


def nested_plan(depth: int) -> str:
    """plan.json text whose routes nest `depth` deep (built as text: `json.dumps` recurses)."""
    head = "".join(
        f'{{"type": "todo_task", "id": "s{i}", "title": "S", "predefined_routes": '
        f'[{{"route_id": "r{i}", "route_name": "R", "condition": "c", "sub_agent_step": '
        for i in range(depth)
    )
    leaf = '{"type": "regular", "id": "leaf", "title": "L"}'
    return '{"steps": [' + head + leaf + "}]}" * depth + "]}"


def _codes(diagnostics: Any) -> list[str]:
    return [d.code for d in diagnostics]


# -- sources ----------------------------------------------------------------------


def test_routes_nested_within_the_limit_compile_format_and_decompile() -> None:
    compiled = todoflow.compile(nested_source(32))
    assert compiled.ok, compiled.diagnostics
    assert format_source(format_source(nested_source(32))) == format_source(nested_source(32))
    files = dict(compiled.artifacts.files)
    back = decompile_text(files["plan.json"], "plan.json", None, "step_config.json", "w", "W")
    assert back.source is not None and todoflow.compile(back.source).plan["steps"] == compiled.plan["steps"]


@pytest.mark.parametrize("depth", [33, 250, 1000])
def test_routes_nested_too_deep_are_one_diagnostic(depth: int) -> None:
    result = analyze(nested_source(depth), "deep.todoflow")
    assert result.workflow is None
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "E0108"
    assert diagnostic.message == f"routes nest {depth} deep here; at most 32"
    assert diagnostic.span.line == 34  # the 33rd route
    assert try_parse(nested_source(depth)).workflow is None
    with pytest.raises(todoflow.TodoflowError, match="E0108"):
        format_source(nested_source(depth))


def test_check_and_compile_agree_on_a_file_nested_1000_deep(tmp_path: Path) -> None:
    path = tmp_path / "deep.todoflow"
    path.write_text(nested_source(1000))
    for command in (["check", str(path)], ["compile", str(path), "-o", str(tmp_path / "out")]):
        result = run_cli(*command)
        assert result.returncode == 1, result.stderr
        assert "error[E0108]: routes nest 1000 deep here; at most 32" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_lone_surrogate_in_source_text_is_a_diagnostic() -> None:
    source = 'workflow w "W" {\n    regular a "caf\ud800" {\n    }\n}\n'
    compiled = todoflow.compile(source)
    assert not compiled.ok
    (diagnostic,) = compiled.diagnostics
    assert (diagnostic.code, diagnostic.span.line, diagnostic.span.column) == ("E0008", 2, 19)
    assert "\ud800" not in diagnostic.render(source)  # printable on any terminal
    diagnostic.render(source).encode("utf-8")


def test_a_file_that_is_not_utf8_is_a_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "latin.todoflow"
    path.write_bytes(b'workflow w "W" {\n  regular a "caf\xe9" {\n  }\n}\n')
    result = analyze_file(path)
    assert result.workflow is None
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics] == [("E0007", 2, 17)]


@pytest.mark.parametrize("item", ['needs "a\\u0000b"', 'output "x\\u0000"', 'prompt work from "p\\u0000.j2"'])
def test_a_nul_in_a_path_is_a_diagnostic(item: str) -> None:
    result = analyze(f'workflow w "W" {{\n    regular a "A" {{\n        {item}\n    }}\n}}\n', "nul.todoflow")
    assert _codes(result.diagnostics) == ["E0401"]
    assert "holds a NUL character" in result.diagnostics[0].message


# -- templates --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "tag"),
    [
        ('{% include "other.j2" %}', "include"),
        ('{% import "macros.j2" as m %}', "import"),
        ('{% from "macros.j2" import m %}', "import"),
        ('{% extends "base.j2" %}', "extends"),
    ],
)
def test_templates_that_load_other_templates_are_reported_at_their_line(template: str, tag: str) -> None:
    source = (
        'workflow w "W" {\n    regular a "A" {\n        prompt work """\n'
        f"            Task {{{{ position }}}}\n            {template}\n"
        '            """\n    }\n}\n'
    )
    result = analyze(source, "t.todoflow")
    assert _codes(result.diagnostics) == ["E0406"]
    diagnostic = result.diagnostics[0]
    assert diagnostic.span.line == 5
    assert f"`{{% {tag} %}}`" in diagnostic.message


def test_a_template_nested_too_deep_for_jinja_is_a_diagnostic() -> None:
    template = "{{ " + "(" * 2000 + "1" + ")" * 2000 + " }}"
    result = analyze(
        f'workflow w "W" {{\n    regular a "A" {{\n        prompt work "{template}"\n    }}\n}}\n'
    )
    assert [d.message for d in result.diagnostics] == ["the `work` prompt does not parse: it nests too deep"]


def test_a_range_too_large_to_render_is_reported_at_compile_time() -> None:
    template = "{% for i in range(10**8) %}x{% endfor %}"
    source = f'workflow w "W" {{\n    regular a "A" {{\n        prompt work "{template}"\n    }}\n}}\n'
    result = analyze(source, "t.todoflow")
    assert _codes(result.diagnostics) == ["E0406"]
    assert "range of 100,000,000 items; at most 10,000" in result.diagnostics[0].message


def test_the_shared_sandbox_refuses_what_it_cannot_render_with_a_template_error() -> None:
    # the runtime renders with this environment and reports a TemplateError with its line
    with pytest.raises(TemplateError, match="at most 10,000"):
        environment().from_string("{{ range(n) | list }}").render(n=10**8)
    with pytest.raises(TemplateError):
        environment().from_string('{% include "x.j2" %}').render()
    assert environment().from_string("{{ range(3) | list }}").render() == "[0, 1, 2]"


# -- plans ------------------------------------------------------------------------


def _decompiled(text: str, config: str | None = None) -> list[str]:
    result = decompile_text(text, "plan.json", config, "step_config.json", "w", "W")
    assert result.source is None
    for diagnostic in result.diagnostics:
        diagnostic.render().encode("utf-8")
    return [d.message for d in result.diagnostics]


def test_plans_nested_within_the_limit_decompile() -> None:
    result = decompile_text(nested_plan(32), "plan.json", None, "step_config.json", "w", "W")
    assert result.source is not None, result.diagnostics


@pytest.mark.parametrize("depth", [33, 200, 1000])
def test_a_plan_nested_too_deep_is_a_diagnostic(depth: int) -> None:
    (message,) = _decompiled(nested_plan(depth))
    if depth < 40:
        assert message == f"steps[0]: routes nest {depth} deep; at most 32"
    else:
        assert message == "(the document): nests more than 128 levels deep"


def test_json_too_deep_for_the_json_reader_is_a_diagnostic() -> None:
    assert _decompiled("[" * 100_000) == ["(the document): nests more than 128 levels deep"]


def test_a_number_of_5000_digits_is_a_diagnostic() -> None:
    plan = '{"steps": [{"type": "regular", "id": "a", "title": "A", "x": ' + "9" * 5000 + "}]}"
    assert _decompiled(plan) == ["steps[0].x: a number of 5,000 digits; at most 4,300"]


def test_a_lone_surrogate_in_a_plan_is_a_diagnostic() -> None:
    plan = '{"steps": [{"type": "regular", "id": "a", "title": "caf\\ud800"}]}'
    assert _decompiled(plan) == [
        "steps[0].title: holds a lone surrogate (`\\ud800`), which is not a character"
    ]


def test_a_key_written_twice_is_a_diagnostic_not_last_wins() -> None:
    plan = '{"steps": [{"type": "regular", "id": "a", "id": "b", "title": "A"}]}'
    assert _decompiled(plan) == [
        "steps[0]: the key `id` is written twice; readers disagree on which one counts"
    ]
    config = '{"steps": [{"id": "a", "agent_configs": {"execution_max_turns": 1, "execution_max_turns": 9}}]}'
    good = '{"steps": [{"type": "regular", "id": "a", "title": "A"}]}'
    assert _decompiled(good, config) == [
        "steps[0].agent_configs: the key `execution_max_turns` is written twice; "
        "readers disagree on which one counts"
    ]


@pytest.mark.parametrize(
    "text",
    [
        nested_plan(250),
        "[" * 100_000,
        '{"steps": [{"type": "regular", "id": "a", "title": "A", "x": ' + "9" * 5000 + "}]}",
        '{"steps": [{"type": "todo_task", "id": "a", "title": "\\ud800", "todo_task_step": {"id": "b"}}]}',
        '{"steps": [], "steps": []}',
    ],
    ids=["nested-250", "brackets", "long-number", "surrogate", "duplicate-key"],
)
def test_migrate_diagnoses_and_writes_nothing(text: str, tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(text)
    before = folder_digest(tmp_path)
    for command in (["migrate", "plan.json", "--write"], ["decompile", "plan.json"]):
        result = run_cli(*command, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert "error[E05" in result.stderr and "Traceback" not in result.stderr
    assert folder_digest(tmp_path) == before


# -- prompt files -----------------------------------------------------------------

PROMPT_FROM = 'workflow w "W" {{\n    regular a "A" {{\n        prompt work from "{path}"\n    }}\n}}\n'


def _prompt_from(tmp_path: Path, path: str) -> list[str]:
    flow = tmp_path / "flows" / "flow.todoflow"
    flow.write_text(PROMPT_FROM.format(path=path))
    return [f"{d.code}: {d.message}" for d in analyze_file(flow).diagnostics]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    (tmp_path / "flows" / "prompts").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "passwd").write_text("root:x:0:0:{{ position }}\n")
    return secret


def test_a_prompt_path_through_a_link_out_of_the_source_folder_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "flows" / "link").symlink_to(outside)
    assert _prompt_from(tmp_path, "link/passwd") == [
        "E0404: cannot read the `work` template `link/passwd`: "
        "it resolves to a file outside the folder of the .todoflow file"
    ]


def test_a_prompt_file_that_is_a_link_out_of_the_source_folder_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "flows" / "prompts" / "work.j2").symlink_to(outside / "passwd")
    (message,) = _prompt_from(tmp_path, "prompts/work.j2")
    assert message.endswith("it resolves to a file outside the folder of the .todoflow file")


def test_a_link_that_stays_inside_the_source_folder_is_followed(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "flows" / "prompts" / "real.j2").write_text("Task {{ position }}\n")
    (tmp_path / "flows" / "prompts" / "work.j2").symlink_to("real.j2")
    assert _prompt_from(tmp_path, "prompts/work.j2") == []


# -- found by the fuzzer ----------------------------------------------------------


def test_a_number_too_large_for_a_32_bit_integer_is_a_diagnostic() -> None:
    for digits in ("2147483648", "9" * 5000):
        result = analyze(f'workflow w "W" {{\n    max_turns {digits}\n    regular a "A" {{\n    }}\n}}\n')
        assert [d.code for d in result.diagnostics] == ["E0010"]
    assert analyze('workflow w "W" {\n    max_turns 2147483647\n    regular a "A" {\n    }\n}\n').workflow


def test_a_plan_whose_source_would_not_compile_gives_no_source_and_says_why(tmp_path: Path) -> None:
    plan = '{"steps": [{"type": "regular", "id": "a", "title": "A", "next_step_id": "ghost"}]}'
    result = decompile_text(plan, "plan.json", None, "step_config.json", "w", "W")
    assert result.source is None
    assert [d.message for d in result.diagnostics] == [
        "the decompiled source does not compile: `next` names `ghost`, but there is no step `ghost`"
    ]
    (tmp_path / "plan.json").write_text(plan)
    assert run_cli("decompile", "plan.json", cwd=tmp_path).returncode == 1


def test_a_plan_that_is_json_null_is_a_diagnostic() -> None:
    assert _decompiled("null") == ["(the document): input should be a valid dictionary or instance of Plan"]
