"""`todoflow diff`: nothing between a workflow and itself, a reformatted copy, its compiled
folder, or a legacy plan and its decompiled source; every kind of change named field by
field; checklists by position (an insertion shifts every later identity); the JSON as its
schema says; unreadable sides exit 2; the docs show what the command prints."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import todoflow
from todoflow.compiler.diff import Side, compare
from todoflow.dsl.formatter import format_source
from todoflow.runtime.definition import read_definition

from ..conftest import EXAMPLES, FIXTURES, ROOT, run_cli

RELEASE = ROOT / "examples" / "release.todoflow"
INSERTED = '            test: "Run the test suite" => "The suite passes" after build\n'


def _side(path: Path) -> Side:
    definition = read_definition(path).or_raise()
    named = path.suffix == ".todoflow"
    return Side(
        str(path),
        definition.files,
        definition.source_sha256,
        definition.workflow_id if named else None,
        definition.title if named else None,
    )


def _json(*args: str, cwd: Path = ROOT) -> tuple[int, dict[str, Any]]:
    result = run_cli("diff", *args, "--format", "json", cwd=cwd)
    assert result.stderr == "" or "warning" in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


def _edited(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    text = RELEASE.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    target = tmp_path / name
    target.write_text(text)
    return target


def _step(diff: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in diff["steps"] if s["step"] == step_id)


def _fields(change: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {f["field"]: (f.get("old"), f.get("new")) for f in change.get("fields", [])}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_a_workflow_against_itself_is_empty(path: Path) -> None:
    assert compare(_side(path), _side(path)).equivalent
    result = run_cli("diff", str(path), str(path))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def _reformatted(text: str) -> str:
    """Comments and blank lines between items, and a deeper indentation: layout only."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if not inside and line.strip() and not line.lstrip().startswith("#"):
            out.append("\n# a comment\n\n")
            line = "  " + line
        out.append(line)
        inside ^= line.count('"""') % 2 == 1
    return "".join(out)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_a_workflow_against_a_reformatted_copy_is_empty(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    copy.write_text(_reformatted(path.read_text()))
    assert copy.read_text() != path.read_text()
    assert todoflow.parse(copy.read_text(), str(copy)) == todoflow.parse(path.read_text(), str(path))
    result = run_cli("diff", str(path), str(copy))
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.parametrize("name", ["messy-layout", "comments", "block-strings"])
def test_the_formatters_fixtures_against_their_formatted_text_are_empty(name: str, tmp_path: Path) -> None:
    messy = FIXTURES / "fmt" / f"{name}.todoflow"
    tidy = tmp_path / f"{name}.todoflow"
    tidy.write_text(format_source(messy.read_text(), str(messy)))
    assert compare(_side(messy), _side(tidy)).equivalent


def test_a_source_against_its_compiled_folder_is_empty(tmp_path: Path) -> None:
    assert run_cli("compile", str(RELEASE), "-o", str(tmp_path / "release")).returncode == 0
    for other in (tmp_path / "release", tmp_path / "release" / "plan.json"):
        result = run_cli("diff", str(RELEASE), str(other))
        assert (result.returncode, result.stdout) == (0, ""), result.stdout


@pytest.mark.parametrize("name", ["mixed", "nested-deep", "already-flat"])
def test_a_legacy_plan_against_its_decompiled_source_is_empty(name: str, tmp_path: Path) -> None:
    plan = FIXTURES / "legacy" / name / "plan.json"
    source = tmp_path / f"{name}.todoflow"
    assert run_cli("decompile", str(plan), "-o", str(source)).returncode == 0
    result = run_cli("diff", str(plan), str(source))
    assert (result.returncode, result.stdout) == (0, ""), result.stdout


def test_a_task_inserted_at_2_shifts_every_later_identity(tmp_path: Path) -> None:
    new = _edited(
        tmp_path, "new.todoflow", ('"dist/ holds both files"\n', '"dist/ holds both files"\n' + INSERTED)
    )
    status, diff = _json(str(RELEASE), str(new))
    assert status == 1 and not diff["equivalent"]
    assert [s["step"] for s in diff["steps"]] == ["ship"]
    tasks = _step(diff, "ship")["tasks"]
    assert (tasks["old_total"], tasks["new_total"]) == (4, 5)
    assert tasks["inserted"] == [2] and tasks["removed"] == []
    assert [(m["old"], m["new"]) for m in tasks["shifted"]] == [(2, 3), (3, 4), (4, 5)]
    assert tasks["first_affected"] == 2
    positions = {p["position"]: p for p in tasks["positions"]}
    assert sorted(positions) == [2, 3, 4, 5]  # task 1 holds the same task
    assert positions[2]["new"]["action"] == "Run the test suite" and positions[2]["now_at"] == 3
    assert positions[3]["was_at"] == 2 and positions[3]["now_at"] == 4
    assert positions[5]["change"] == "added" and positions[5]["was_at"] == 4
    assert [p["affects_confirmed"] for p in tasks["positions"]] == [True, True, True, False]


def test_a_changed_expected_result_is_called_out_for_runs_that_confirmed_it(tmp_path: Path) -> None:
    new = _edited(tmp_path, "new.todoflow", ('"git tag v2.0 exists"', '"git tag v2.1 exists"'))
    _, diff = _json(str(RELEASE), str(new))
    tasks = _step(diff, "ship")["tasks"]
    assert tasks["first_affected"] == 3 and tasks["shifted"] == [] and tasks["inserted"] == []
    (position,) = tasks["positions"]
    assert position["position"] == 3 and position["fields"] == ["expected_result"]
    assert position["affects_confirmed"] is True
    constraint = _edited(
        tmp_path, "constraint.todoflow", ('"Never push to main directly"', '"Never force-push"')
    )
    _, diff = _json(str(RELEASE), str(constraint))
    tasks = _step(diff, "ship")["tasks"]
    assert "first_affected" not in tasks  # a constraint changes no confirmation
    assert [p["fields"] for p in tasks["positions"]] == [["constraints"], ["constraints"]]


def test_each_field_of_a_step_is_compared(tmp_path: Path) -> None:
    new = _edited(
        tmp_path,
        "new.todoflow",
        ('"Prepare release branch"', '"Prepare the branch"'),
        ("record its head commit.", "record its head."),
        ('success "branch.json names', 'success "branch.json has'),
        ('needs "branch.json", "changelog.md"', 'needs "branch.json"'),
        ('output "final_status.json"', 'output "status.json"'),
        ('expect file "final_status.json"', 'expect file "status.json"'),
        ("        max_turns 100\n", "        max_turns 120\n"),
        (
            '        llm vertex "gemini-2.5-pro"\n        conditional_llm',
            '        llm openai "gpt-4.1"\n        conditional_llm',
        ),
        ('conditional_llm openai "gpt-4.1-mini"', 'conditional_llm openai "gpt-4.1-nano"'),
        ("        mode learn_code\n", ""),
        ("generic on", "generic off"),
        ('"To compile and package the code"', '"To build the code"'),
        ("        next end\n", '        prompt work "Do it: {{ task.action }}"\n        next end\n'),
    )
    status, diff = _json(str(RELEASE), str(new))
    assert status == 1
    assert _fields(_step(diff, "prepare")) == {
        "title": ("Prepare release branch", "Prepare the branch"),
        "description": (
            "Create release/2.0 from main and record its head commit.",
            "Create release/2.0 from main and record its head.",
        ),
        "success": (
            "branch.json names release/2.0 and its head commit.",
            "branch.json has release/2.0 and its head commit.",
        ),
    }
    ship = _step(diff, "ship")
    assert _fields(ship) == {
        "needs": (["branch.json", "changelog.md"], ["branch.json"]),
        "output": ("final_status.json", "status.json"),
        "expect": (["final_status.json"], ["status.json"]),
        "generic": (True, False),
        "llm": ("vertex:gemini-2.5-pro", "openai:gpt-4.1"),
        "conditional_llm": ("openai:gpt-4.1-mini", "openai:gpt-4.1-nano"),
        "max_turns": (100, 120),
        "mode": ("learn_code", None),
    }
    assert ship["routes"] == [
        {
            "route": "build",
            "change": "changed",
            "fields": [
                {"field": "condition", "old": "To compile and package the code", "new": "To build the code"}
            ],
        }
    ]
    (prompt,) = ship["prompts"]
    assert prompt["field"] == "work" and prompt["new"] == "Do it: {{ task.action }}"
    assert "Expected result:" in prompt["old"]  # the built-in template it replaces


ROUTED = """\
workflow w "W" {
    regular a "A" {
    }

    todo_task b "B" {
        route r "R" when "To do it" {
            regular sub "Sub" {
                expect file "out.txt"
            }
        }
    }

    regular c "C" {
        next end
    }
}
"""


def test_steps_added_removed_and_moved(tmp_path: Path) -> None:
    old = tmp_path / "old.todoflow"
    old.write_text(ROUTED)
    moved = tmp_path / "moved.todoflow"  # c written first, run last: its place moved, not its run
    moved.write_text(
        ROUTED.replace('    regular c "C" {\n        next end\n    }\n', "")
        .replace(
            '    regular a "A" {\n', '    regular c "C" {\n        next end\n    }\n\n    regular a "A" {\n'
        )
        .replace('    regular a "A" {\n    }\n', '    regular a "A" {\n        next b\n    }\n')
        .replace('    todo_task b "B" {\n', '    todo_task b "B" {\n        next c\n')
    )
    _, diff = _json(str(old), str(moved))
    assert [(s["step"], s["change"], s.get("moved")) for s in diff["steps"]] == [
        ("c", "changed", {"field": "place", "old": "step 3", "new": "step 1"})
    ]
    other = tmp_path / "other.todoflow"
    other.write_text(
        ROUTED.replace('regular sub "Sub"', 'regular helper "Helper"').replace(
            '    regular c "C" {\n        next end\n    }\n', '    regular d "D" {\n    }\n'
        )
    )
    _, diff = _json(str(old), str(other))
    changes = [(s["step"], s["change"], s["place"]) for s in diff["steps"]]
    assert changes == [
        ("b", "changed", "step 2"),
        ("helper", "added", "route `r` of `b`"),
        ("d", "added", "step 3"),
        ("sub", "removed", "route `r` of `b`"),
        ("c", "removed", "step 3"),
    ]
    assert _step(diff, "b")["routes"][0]["fields"] == [{"field": "step", "old": "sub", "new": "helper"}]
    assert _fields(_step(diff, "sub"))["expect"] == (["out.txt"], None)


def test_the_json_is_what_its_schema_says(tmp_path: Path) -> None:
    schema = json.loads(run_cli("schema", "diff").stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    new = _edited(
        tmp_path, "new.todoflow", ('"dist/ holds both files"\n', '"dist/ holds both files"\n' + INSERTED)
    )
    for old, other in [
        (RELEASE, new),
        (RELEASE, ROOT / "examples" / "orchestrated.todoflow"),
        (RELEASE, RELEASE),
    ]:
        _, diff = _json(str(old), str(other))
        jsonschema.validate(diff, schema)


def test_a_side_that_cannot_be_read_exits_2(tmp_path: Path) -> None:
    missing = run_cli("diff", str(RELEASE), str(tmp_path / "nothere.todoflow"))
    assert missing.returncode == 2 and "nothere.todoflow" in missing.stderr and missing.stdout == ""
    broken = tmp_path / "broken.todoflow"
    broken.write_text('workflow w "W" {\n    regular a "A" {\n        next nowhere\n    }\n}\n')
    errors = run_cli("diff", str(broken), str(RELEASE))
    assert errors.returncode == 2 and "error[" in errors.stderr and "broken.todoflow:3:" in errors.stderr
    bad = run_cli("diff", str(FIXTURES / "legacy" / "bad" / "not-json.json"), str(RELEASE))
    assert bad.returncode == 2 and "error[E0501]" in bad.stderr
    usage = run_cli("diff", str(RELEASE))
    assert usage.returncode == 2 and "usage:" in usage.stderr
    for result in (missing, errors, bad, usage):
        assert "Traceback" not in result.stderr


def _console(block: str) -> tuple[list[str], str]:
    first, _, output = block.partition("\n")
    assert first.startswith("$ todoflow ")
    return first.removeprefix("$ todoflow ").split(), output


@pytest.mark.parametrize(
    ("doc", "name", "edits"),
    [
        (
            "docs/runtime.md",
            "release-tests.todoflow",
            [('"dist/ holds both files"\n', '"dist/ holds both files"\n' + INSERTED)],
        ),
        (
            "README.md",
            "release-2.1.todoflow",
            [
                ('"git tag v2.0 exists"', '"git tag v2.1 exists"'),
                ("        max_turns 100\n", "        max_turns 120\n"),
            ],
        ),
    ],
)
def test_the_docs_show_what_diff_prints(
    doc: str, name: str, edits: list[tuple[str, str]], tmp_path: Path
) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    fences = re.findall(r"^( *)```console\n(.*?)^\1```\n", text, re.S | re.M)  # in a list item: indented
    blocks = [re.sub(f"^{indent}", "", body, flags=re.M) for indent, body in fences]
    block = next(b for b in blocks if b.startswith("$ todoflow diff"))
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    _edited(tmp_path, name, *edits)
    args, shown = _console(block)
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == shown


def test_the_workflows_title_is_compared_between_sources_only(tmp_path: Path) -> None:
    new = _edited(tmp_path, "new.todoflow", ('"Release 2.0"', '"Release 2.1"'))
    status, diff = _json(str(RELEASE), str(new))
    assert status == 1 and diff["steps"] == []
    assert diff["workflow"] == [{"field": "title", "old": "Release 2.0", "new": "Release 2.1"}]
    text = run_cli("diff", str(RELEASE), str(new)).stdout
    assert '~ workflow title: "Release 2.0" -> "Release 2.1"' in text
    assert text.endswith("NEW differs from OLD: the workflow's title\n")
    assert run_cli("compile", str(new), "-o", str(tmp_path / "compiled")).returncode == 0
    assert (
        run_cli("diff", str(RELEASE), str(tmp_path / "compiled")).returncode == 0
    )  # a plan names no workflow
