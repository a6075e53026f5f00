"""The command line, run as a user runs it: exit codes, stdout and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ..conftest import EXAMPLES, INVALID, ROOT, relative, run_cli

BROKEN = 'workflow w "W" {\n    regular a "A" {\n        descripton "x"\n    }\n}\n'
UGLY = 'workflow w "W" { regular a "A" { description "x" } }\n'


def test_check_clean_files_exits_0() -> None:
    result = run_cli("check", *map(relative, EXAMPLES))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.endswith(f"{len(EXAMPLES)} files checked: 1 note\n")
    assert "note[N0301]: task `tag` moved after `notes`: it needs `notes`" in result.stderr


def test_check_reports_errors_with_location_excerpt_and_help(tmp_path: Path) -> None:
    path = tmp_path / "broken.todoflow"
    path.write_text(BROKEN)
    result = run_cli("check", str(path))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{path}:3:9: error[E0001]: expected a step item")
    assert "3 |         descripton" in result.stderr
    assert "  |         ^^^^^^^^^^" in result.stderr
    assert "= help: did you mean `description`?" in result.stderr
    assert result.stderr.endswith("1 file checked: 1 error\n")
    assert "Traceback" not in result.stderr


def test_check_json_lists_the_same_diagnostics(tmp_path: Path) -> None:
    path = tmp_path / "broken.todoflow"
    path.write_text(BROKEN)
    result = run_cli("check", "--format", "json", str(path))
    assert result.returncode == 1
    (entry,) = json.loads(result.stdout)
    assert entry == {
        "code": "E0001",
        "severity": "error",
        "message": entry["message"],
        "help": "did you mean `description`?",
        "path": str(path),
        "line": 3,
        "column": 9,
        "end_line": 3,
        "end_column": 19,
        "notes": [],
    }
    assert result.stderr == ""


def test_check_json_clean_is_an_empty_array() -> None:
    result = run_cli("check", "--format", "json", relative(EXAMPLES[0]))
    assert (result.returncode, json.loads(result.stdout)) == (0, [])


def test_check_reads_stdin() -> None:
    result = run_cli("check", "-", stdin=BROKEN)
    assert result.returncode == 1
    assert result.stderr.startswith("<stdin>:3:9: error[E0001]")


def test_check_every_invalid_fixture_exits_1_without_traceback() -> None:
    result = run_cli("check", *map(relative, INVALID))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    for path in INVALID:
        assert relative(path) + ":" in result.stderr


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01\x02 binary \xff\xfe", b'workflow w "\xe9" {}', b"{" * 10_000_000, b"\xef\xbb\xbf"],
    ids=["empty", "binary", "latin-1", "10MB-of-braces", "bom-only"],
)
def test_broken_input_is_diagnosed_never_a_traceback(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.todoflow"
    path.write_bytes(content)
    result = run_cli("check", str(path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"{path}:1:" in result.stderr


def test_not_utf8_points_at_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin.todoflow"
    path.write_bytes(b'workflow w "W" {\n  regular a "caf\xe9" {\n  }\n}\n')
    result = run_cli("check", str(path))
    assert result.returncode == 1
    assert f"{path}:2:17: error[E0007]: this file is not UTF-8 text" in result.stderr


def test_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("check", str(tmp_path / "missing.todoflow"))
    assert result.returncode == 2
    assert "cannot read" in result.stderr and "missing.todoflow" in result.stderr
    assert run_cli("check", str(tmp_path)).returncode == 2


@pytest.mark.parametrize("args", [[], ["check"], ["fmt"], ["nonsense"], ["check", "--format", "xml", "x"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_fmt_rewrites_in_place(tmp_path: Path) -> None:
    path = tmp_path / "ugly.todoflow"
    path.write_text(UGLY)
    path.chmod(0o640)
    result = run_cli("fmt", str(path))
    assert result.returncode == 0
    assert path.stat().st_mode & 0o777 == 0o640  # rewritten in place, permissions kept
    assert path.read_text() == 'workflow w "W" {\n    regular a "A" {\n        description "x"\n    }\n}\n'
    assert result.stderr == f"formatted {path}\n"
    again = run_cli("fmt", str(path))
    assert (again.returncode, again.stderr) == (0, "")


def test_fmt_check_lists_unformatted_files_and_writes_nothing(tmp_path: Path) -> None:
    ugly = tmp_path / "ugly.todoflow"
    ugly.write_text(UGLY)
    clean = ROOT / "examples" / EXAMPLES[0].name
    result = run_cli("fmt", "--check", str(ugly), str(clean))
    assert result.returncode == 1
    assert result.stdout == f"{ugly}\n"
    assert ugly.read_text() == UGLY
    assert run_cli("fmt", "--check", str(clean)).returncode == 0


def test_fmt_stdin_to_stdout() -> None:
    result = run_cli("fmt", "-", stdin=UGLY)
    assert result.returncode == 0
    assert result.stdout.startswith('workflow w "W" {\n    regular a "A" {\n')


def test_fmt_leaves_a_broken_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "broken.todoflow"
    path.write_text(BROKEN)
    result = run_cli("fmt", str(path))
    assert result.returncode == 1
    assert "error[E0001]" in result.stderr
    assert path.read_text() == BROKEN


def test_version_is_the_one_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    result = run_cli("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"todoflow {declared}")


def test_compile_writes_every_artifact(tmp_path: Path) -> None:
    result = run_cli("compile", relative(EXAMPLES[0]), "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    written = sorted(
        p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()
    )
    workflow = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert "plan.json" in written and "step_config.json" in written
    assert any(name.startswith("machines/") and name.endswith(".py") for name in written)
    assert any(name.startswith("machines/") and name.endswith(".mmd") for name in written)
    assert any(name.startswith("prompts/") for name in written)
    assert len(workflow["source_sha256"]) == 64


def test_written_files_get_the_permissions_of_a_plain_write(tmp_path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    result = run_cli("compile", relative(EXAMPLES[0]), "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    for path in (tmp_path / "out").rglob("*.json"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    assert not [p for p in (tmp_path / "out").rglob(".*")], "a temporary file was left behind"


def test_compile_to_stdout_prints_plan_json() -> None:
    result = run_cli("compile", "examples/release.todoflow", "-o", "-")
    assert result.returncode == 0
    assert json.loads(result.stdout)["steps"][0]["id"] == "prepare"
    assert "note[N0301]" in result.stderr


def test_compile_writes_nothing_when_there_is_an_error(tmp_path: Path) -> None:
    broken = ROOT / "tests" / "fixtures" / "invalid" / "task-cycles.todoflow"
    result = run_cli("compile", str(broken), "-o", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "error[E0301]" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["mermaid", "md", "dot"])
def test_graph_formats_are_deterministic(fmt: str) -> None:
    first = run_cli("graph", "examples/release.todoflow", "--format", fmt)
    second = run_cli("graph", "examples/release.todoflow", "--format", fmt)
    assert first.returncode == 0
    assert first.stdout == second.stdout
    assert "s2_ship_revise" in first.stdout or "ship: Revise" in first.stdout
    assert "0x" not in first.stdout


def test_graph_direction_and_one_step() -> None:
    result = run_cli(
        "graph", "examples/data-pipeline.todoflow", "--direction", "TB", "--step", "transform-exports"
    )
    assert result.returncode == 0
    assert result.stdout.startswith("stateDiagram-v2\n    direction TB\n")
    assert "Intake" in result.stdout and "s1_transform_exports_revise" in result.stdout
    missing = run_cli("graph", "examples/data-pipeline.todoflow", "--step", "nope")
    assert missing.returncode == 2 and "no step `nope`" in missing.stderr


def test_graph_svg_runs_graphviz(tmp_path: Path) -> None:
    fake = tmp_path / "dot"
    fake.write_text('#!/bin/sh\necho "<svg><!-- $1 -->"\ncat | head -c 20\necho "</svg>"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-m", "todoflow", "graph", "examples/release.todoflow", "--format", "svg"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("<svg><!-- -Tsvg -->\ndigraph")


def test_graph_svg_without_graphviz_says_which_package(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "todoflow", "graph", "examples/release.todoflow", "--format", "svg"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].endswith("(e.g. `apt-get install graphviz`)")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["plan", "step-config", "todos", "diff"])
def test_schema_prints_json_schema(name: str) -> None:
    result = run_cli("schema", name)
    assert result.returncode == 0
    assert json.loads(result.stdout)["type"] == "object"
