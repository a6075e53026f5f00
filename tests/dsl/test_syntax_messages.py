"""Syntax errors inside a construct say which of its arguments is missing and how the
construct is written: one table of forms (`dsl.wording.FORMS`), used for every keyword
that takes arguments, checked against the grammar so that a new keyword needs a form."""

from __future__ import annotations

import pytest

from todoflow.dsl import try_parse
from todoflow.dsl.builder import Builder
from todoflow.dsl.grammar import load_parser
from todoflow.dsl.wording import FORMS, keyword_literals

STEP = 'workflow w "W" {{\n    todo_task a "A" {{\n        {item}\n    }}\n}}\n'
TOP = 'workflow w "W" {{\n    {item}\n\n    regular a "A" {{\n    }}\n}}\n'

CASES = [
    (
        TOP.format(item="llm vertex"),
        "2:5: expected a model id (a string) after `llm vertex`, found `regular`",
        '`llm` takes a provider and a model id: `llm vertex "gemini-2.5-pro"`',
    ),
    (
        STEP.format(item="conditional_llm openai\n    }"),
        "3:9: expected a model id (a string) after `conditional_llm openai`, found `}`",
        '`conditional_llm` takes a provider and a model id: `conditional_llm openai "gpt-4.1-mini"`',
    ),
    (
        STEP.format(
            item='route r "R" when "c" {\n            regular one "One" {\n            }\n'
            '            regular two "Two" {\n            }\n        }'
        ),
        "6:13: expected `}` to close `route r`, found `regular`",
        "a route holds exactly one step: give each further step a route of its own",
    ),
    (
        STEP.format(item='route r "R" {\n            regular one "One" {\n            }\n        }'),
        '3:21: expected `when` after `route r "R"`, found `{`',
        "`route` takes an id, a name, `when` and a condition, then exactly one step in braces: "
        '`route build "Build" when "To build the code" { regular build-it "Build it" { ... } }`',
    ),
    (
        STEP.format(item="max_turns\n    }"),
        "3:9: expected a whole number after `max_turns`, found `}`",
        "`max_turns` takes a whole number: `max_turns 60`",
    ),
    (
        STEP.format(item="output\n    }"),
        "3:9: expected a path (a string) after `output`, found `}`",
        '`output` takes a path: `output "report.json"`',
    ),
    (
        STEP.format(item='expect "x.json"'),
        "3:16: expected `file` after `expect`, found a string",
        '`expect` takes `file` and a path: `expect file "report.json"`',
    ),
    (
        STEP.format(item='needs "a.json",\n    }'),
        '3:9: expected another path (a string) after `needs "a.json",`, found `}`',
        '`needs` takes one or more paths, separated by `,`: `needs "branch.json", "changelog.md"`',
    ),
    (
        STEP.format(item="description\n    }"),
        "3:9: expected a text (a string) after `description`, found `}`",
        '`description` takes a text: `description "What the step does."`',
    ),
    (
        STEP.format(item="success 42"),
        "3:17: expected a text (a string) after `success`, found the number `42`",
        '`success` takes a text: `success "How to tell the step is done."`',
    ),
    (
        STEP.format(item='next "b"'),
        "3:14: expected a step id or `end` after `next`, found a string",
        "`next` takes a step id or `end`: `next publish`",
    ),
    (
        STEP.format(item="mode fast"),
        "3:14: expected `learn_code` after `mode`, found `fast`",
        "`mode` takes `learn_code`: `mode learn_code`",
    ),
    (
        STEP.format(item="generic maybe"),
        "3:17: expected `on` or `off` after `generic`, found `maybe`",
        "`generic` takes `on` or `off`: `generic off`",
    ),
    (
        STEP.format(item="prompt work from\n    }"),
        "3:9: expected a file name (a string) after `prompt work from`, found `}`",
        "`prompt` takes a prompt kind, then a template or `from` and a file: "
        '`prompt work "Do {{ task.action }}"` or `prompt work from "prompts/work.j2"`',
    ),
    (
        STEP.format(item='tasks "x" => "y"'),
        "3:15: expected `{` after `tasks`, found a string",
        '`tasks` takes its tasks in braces: `tasks { "Tag the release" => "git tag v2.0 exists" }`',
    ),
    (
        STEP.format(item='tasks {\n            "x" => "y" after\n        }'),
        "4:24: expected a task label after `after`, found `}`",
        '`after` takes task labels, separated by `,`: `"Tag" => "tagged" after build, notes`',
    ),
    (
        STEP.format(item='tasks {\n            a: "x" => "y"\n            constraint "c" on\n        }'),
        '5:13: expected a task label or `all` after `constraint "c" on`, found `}`',
        "`constraint` takes a text, `on` and the labels of its tasks (or `all`): "
        '`constraint "Never push to main" on build, tag`',
    ),
    (
        'workflow w "W" {\n    regular a {\n    }\n}\n',
        "2:15: expected a title (a string) after `regular a`, found `{`",
        "`regular` takes an id and a title, then its items in braces: "
        '`regular prepare "Prepare the branch" { ... }`',
    ),
    (
        'workflow w "W" {\n    todo_task "A" {\n    }\n}\n',
        "2:15: expected an id (a name) after `todo_task`, found a string",
        '`todo_task` takes an id and a title, then its items in braces: `todo_task ship "Ship it" { ... }`',
    ),
    (
        'workflow "W" {\n}\n',
        "1:10: expected an id (a name) after `workflow`, found a string",
        "`workflow` takes an id and a title, then its steps in braces: "
        '`workflow release "Release 2.0" { ... }`',
    ),
]


@pytest.mark.parametrize(("source", "message", "help"), CASES, ids=[c[1].split(" after ")[-1] for c in CASES])
def test_an_incomplete_construct_says_what_is_missing_and_how_it_is_written(
    source: str, message: str, help: str
) -> None:
    first = next(d for d in try_parse(source, "x.todoflow").diagnostics if d.code == "E0001")
    assert f"{first.span.line}:{first.span.column}: {first.message}" == message
    assert first.help == help


def test_a_misspelt_argument_keeps_its_suggestion() -> None:
    source = STEP.format(item="generic of")
    first = try_parse(source).diagnostics[0]
    assert first.message == "expected `on` or `off` after `generic`, found `of`"
    assert first.help == "did you mean `off`?"


def test_every_keyword_that_takes_arguments_has_a_form() -> None:
    parser = load_parser(Builder(), [])
    words = keyword_literals(parser.terminals)
    followed = {
        symbol.name
        for rule in parser.rules
        for symbol, _ in zip(rule.expansion, rule.expansion[1:], strict=False)
        if symbol.name in words
    }
    arguments = {name for form in FORMS.values() for slot in form.slots for name in slot.terminals}
    assert followed - arguments <= set(FORMS) <= followed
