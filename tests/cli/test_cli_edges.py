"""The edges of the command line: folders given to `check` and `fmt`, `--quiet` on every
verb, and `graph` keeping the compiler's notes to itself unless asked."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from todoflow.cli import build_parser

from ..conftest import EXAMPLES, ROOT, run_cli

RELEASE = next(p for p in EXAMPLES if p.name == "release.todoflow")
BROKEN = 'workflow x "X" {\n    regular a "A" { next nowhere }\n}\n'
MESSY = 'workflow x "X" {\nregular a "A" {  description "d" }\n}\n'


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def _tree(root: Path) -> None:
    """Workflows at several depths, and copies where no one means them to be checked."""
    for place in ("flows", "flows/deep/er", ".hidden", ".venv/lib", "node_modules/x", "build", "ignored"):
        (root / place).mkdir(parents=True, exist_ok=True)
        shutil.copy(RELEASE, root / place / "release.todoflow")
    (root / "flows" / "notes.txt").write_text("not a workflow\n")


def test_check_takes_a_folder_and_recurses_to_its_workflows(tmp_path: Path) -> None:
    _tree(tmp_path)
    result = run_cli("check", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "3 files checked" in result.stderr  # flows, flows/deep/er and ignored: no hidden or tool folders
    assert "flows/deep/er/release.todoflow:" in result.stderr
    assert ".venv" not in result.stderr
    assert "node_modules" not in result.stderr


def test_inside_a_git_work_tree_what_gitignore_ignores_is_left_out(tmp_path: Path) -> None:
    _tree(tmp_path)
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("ignored/\n.venv/\nnode_modules/\nbuild/\n")
    (tmp_path / ".hidden" / "release.todoflow").unlink()
    result = run_cli("check", "--format", "json", ".", cwd=tmp_path)
    paths = {d["path"] for d in json.loads(result.stdout)}
    assert paths == {"flows/release.todoflow", "flows/deep/er/release.todoflow"}
    only_ignored = run_cli("check", "ignored", cwd=tmp_path)
    assert only_ignored.returncode == 2
    assert only_ignored.stderr == (
        "todoflow: error: no .todoflow files in ignored that git does not ignore (1 ignored)\n"
    )


def test_a_folder_without_workflows_is_a_usage_error_that_names_it(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.md").write_text("# no workflows\n")
    for verb in (["check"], ["fmt"], ["fmt", "--check"]):
        result = run_cli(*verb, "empty", cwd=tmp_path)
        assert result.returncode == 2, verb
        assert result.stderr == "todoflow: error: no .todoflow files in empty\n"
        assert "Is a directory" not in result.stderr


def test_fmt_takes_a_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "messy.todoflow").write_text(MESSY)
    (tmp_path / "a" / "clean.todoflow").write_text(RELEASE.read_text())
    listed = run_cli("fmt", "--check", "a", cwd=tmp_path)
    assert (listed.returncode, listed.stdout) == (1, "a/b/messy.todoflow\n")
    written = run_cli("fmt", "a", cwd=tmp_path)
    assert (written.returncode, written.stderr) == (0, "formatted a/b/messy.todoflow\n")
    assert run_cli("fmt", "--check", "a", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_keeps_errors_only(tmp_path: Path, where: str) -> None:
    (tmp_path / "broken.todoflow").write_text(BROKEN)
    shutil.copy(RELEASE, tmp_path / "release.todoflow")
    words = ["-q", "check", "."] if where == "before" else ["check", ".", "--quiet"]
    result = run_cli(*words, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("broken.todoflow:2:26: error[E0102]:")
    assert "= help:" in result.stderr  # an error keeps its excerpt and help
    assert "note[N0301]" not in result.stderr
    assert "checked" not in result.stderr  # no summary
    clean = run_cli("check", "-q", "release.todoflow", cwd=tmp_path)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")


def test_quiet_silences_what_verbs_say_for_information(tmp_path: Path) -> None:
    shutil.copy(RELEASE, tmp_path / "release.todoflow")
    compiled = run_cli("compile", "release.todoflow", "-o", "out", "--quiet", cwd=tmp_path)
    assert (compiled.returncode, compiled.stderr) == (0, "")
    assert (tmp_path / "out" / "plan.json").is_file()
    (tmp_path / "messy.todoflow").write_text(MESSY)
    formatted = run_cli("-q", "fmt", "messy.todoflow", cwd=tmp_path)
    assert (formatted.returncode, formatted.stderr) == (0, "")
    missing = run_cli("fmt", "-q", "missing.todoflow", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == "todoflow: error: cannot read missing.todoflow: No such file or directory\n"


def test_every_verb_takes_quiet() -> None:
    parser = build_parser()
    verbs = next(a for a in parser._actions if a.dest == "command").choices
    assert verbs
    for name, verb in verbs.items():
        assert "--quiet" in verb._option_string_actions, name
        assert "-q" in verb._option_string_actions, name


def test_graph_prints_the_compile_notes_only_when_asked(tmp_path: Path) -> None:
    shutil.copy(RELEASE, tmp_path / "release.todoflow")
    plain = run_cli("graph", "release.todoflow", cwd=tmp_path)
    assert plain.returncode == 0
    assert plain.stdout.startswith("stateDiagram")
    assert plain.stderr == ""
    asked = run_cli("graph", "release.todoflow", "--notes", cwd=tmp_path)
    assert "note[N0301]" in asked.stderr
    assert asked.stdout == plain.stdout
    (tmp_path / "broken.todoflow").write_text(BROKEN)
    broken = run_cli("graph", "broken.todoflow", cwd=tmp_path)
    assert broken.returncode == 1
    assert "error[E0102]" in broken.stderr


STYLE = re.compile(r"\x1b\[[0-9;]*m")


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """What `todoflow ARGS` writes when its stderr (and stdout) is a terminal."""
    parent, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "todoflow", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=child,
        env={k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")} | env,
    )
    os.close(child)
    output = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # the terminal is closed once the program has exited
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(parent)
    return output.decode().replace("\r\n", "\n")


def test_diagnostics_are_coloured_on_a_terminal_only(tmp_path: Path) -> None:
    (tmp_path / "broken.todoflow").write_text(BROKEN)
    plain = run_cli("check", "broken.todoflow", cwd=tmp_path, env={"NO_COLOR": "", "FORCE_COLOR": ""})
    assert "\x1b[" not in plain.stderr  # a pipe
    shown = _on_a_terminal(["check", "broken.todoflow"], tmp_path, {"TERM": "xterm"})
    assert "\x1b[1;31merror[E0102]:\x1b[0m" in shown
    assert STYLE.sub("", shown) == plain.stderr
    for off in ({"TERM": "xterm", "NO_COLOR": "1"}, {"TERM": "dumb"}):
        assert _on_a_terminal(["check", "broken.todoflow"], tmp_path, off) == plain.stderr, off


def test_force_color_colours_a_pipe_unless_no_color_says_otherwise(tmp_path: Path) -> None:
    (tmp_path / "broken.todoflow").write_text(BROKEN)
    shutil.copy(RELEASE, tmp_path / "release.todoflow")
    forced = run_cli("check", ".", cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    plain = run_cli("check", ".", cwd=tmp_path, env={"FORCE_COLOR": "", "NO_COLOR": ""})
    assert "\x1b[1;36mnote[N0301]:\x1b[0m" in forced.stderr
    assert STYLE.sub("", forced.stderr) == plain.stderr
    both = run_cli("check", ".", cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert both.stderr == plain.stderr
    zero = run_cli("check", ".", cwd=tmp_path, env={"FORCE_COLOR": "0", "NO_COLOR": ""})
    assert zero.stderr == plain.stderr
    quiet = run_cli("check", ".", "-q", cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "error[E0102]" in STYLE.sub("", quiet.stderr)  # --quiet reads coloured text too
    assert "N0301" not in quiet.stderr


@pytest.mark.parametrize(
    "verb",
    [["check", "--format", "json", str(ROOT / "tests" / "fixtures" / "invalid")], ["status", "--json"]],
)
def test_a_reader_that_closes_the_pipe_ends_the_verb_quietly(tmp_path: Path, verb: list[str]) -> None:
    """`todoflow check --format json | head`: the reader goes before the output is written;
    todoflow stops without a traceback, as a program killed by SIGPIPE does."""
    shutil.copytree(ROOT / "tests" / "fixtures" / "runs", tmp_path / ".todoflow" / "runs")
    child = subprocess.Popen(
        [sys.executable, "-m", "todoflow", *verb],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # before todoflow has even started: its first write meets a closed pipe
    with child.stderr:
        stderr = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141 and stderr == ""
