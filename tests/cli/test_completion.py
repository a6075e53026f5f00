"""`todoflow completion bash|zsh|fish`, exercised in the shells themselves: the bash script
sourced in `bash -c` with COMP_WORDS/COMP_CWORD set and its function called; the zsh
script through zsh's bashcompinit; the fish script through fish's `complete -C`. Run ids
come from real runs at the store location the line names."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from todoflow.cli import build_parser
from todoflow.completion import verbs

from ..conftest import EXAMPLES, ROOT, run_cli

TODOFLOW = str(Path(sys.executable).with_name("todoflow"))  # what the script calls for run ids
RELEASE = next(p for p in EXAMPLES if p.name == "release.todoflow")
FOLDERS = [".todoflow", "flows", "other", "sub dir"]  # of the project below: runs in .todoflow and other


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Workflows, a file that is not one, and a run in each of two store locations."""
    root = tmp_path_factory.mktemp("completion")
    (root / "flows").mkdir()
    (root / "sub dir").mkdir()
    shutil.copy(RELEASE, root / "flows" / "release.todoflow")
    (root / "notes.txt").write_text("not a workflow\n")
    (root / "replies.yaml").write_text("")
    for where in (".todoflow/runs", "other"):
        result = run_cli(
            "run",
            str(RELEASE),
            "--agent",
            f"scripted:{ROOT / 'examples' / 'replies' / 'release.yaml'}",
            "--run-dir",
            where,
            "--workspace",
            str(root),
            cwd=root,
        )
        assert result.returncode == 0, result.stderr
    return root


def _runs(project: Path, where: str) -> list[str]:
    return sorted(p.name for p in (project / where).iterdir() if p.is_dir())


def _script(shell: str, folder: Path) -> Path:
    result = run_cli("completion", shell)
    assert result.returncode == 0, result.stderr
    path = folder / f"todoflow.{shell}"
    path.write_text(result.stdout)
    return path


def bash(project: Path, *words: str) -> list[str]:
    """The candidates bash's completion function offers for the line `words` (the last
    one being completed)."""
    script = _script("bash", project.parent)
    line = " ".join(f'"{w}"' for w in (TODOFLOW, *words))
    program = (
        f"source '{script}'; COMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); "
        'COMPREPLY=(); _todoflow; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "-c", program], cwd=project, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return [w for w in result.stdout.split("\n") if w]


def test_verbs_and_global_options(project: Path) -> None:
    assert bash(project, "") == [v.name for v in verbs(build_parser())]
    assert bash(project, "c") == ["check", "compile", "completion"]
    assert bash(project, "--") == ["--help", "--version", "--quiet"]
    assert bash(project, "-q", "ch") == ["check"]  # an option before the verb


def test_every_option_of_every_verb_is_offered_as_the_parser_has_it(project: Path) -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, verb in commands.items():
        expected = sorted(s for a in verb._actions for s in a.option_strings if s.startswith("--"))
        assert sorted(bash(project, name, "--")) == expected, name


def test_option_values(project: Path) -> None:
    assert bash(project, "check", "--format", "") == ["text", "json", "sarif", "github"]
    assert bash(project, "check", "--format", "=", "s") == ["sarif"]  # bash splits `--format=s`
    assert bash(project, "graph", "--view", "p") == ["plan"]
    assert bash(project, "run", "--agent", "") == ["human", "llm", "scripted:"]
    assert bash(project, "run", "--agent", "scripted:rep") == ["scripted:replies.yaml"]
    assert bash(project, "run", "--agent", "scripted", ":", "rep") == ["replies.yaml"]
    assert sorted(bash(project, "compile", "flows/release.todoflow", "-o", "")) == FOLDERS
    assert bash(project, "schema", "") == ["plan", "step-config", "todos", "diff", "replay", "dry-run"]
    assert bash(project, "learnings", "") == ["list", "show", "retire"]
    assert bash(project, "completion", "") == ["bash", "zsh", "fish"]


def test_workflow_arguments_offer_todoflow_files_and_folders(project: Path) -> None:
    assert sorted(bash(project, "check", "")) == FOLDERS  # not notes.txt
    assert bash(project, "check", "flows/") == ["flows/release.todoflow"]
    assert bash(project, "fmt", "--check", "flows/release.todoflow", "flows/") == ["flows/release.todoflow"]
    assert bash(project, "run", "fl") == ["flows"]
    assert bash(project, "graph", "--format", "svg", "flows/") == ["flows/release.todoflow"]
    assert bash(project, "diff", "flows/release.todoflow", "flows/") == ["flows/release.todoflow"]
    assert bash(project, "replay", "some-run", "--against", "fl") == ["flows"]


def test_run_ids_come_from_the_store_location_on_the_line(project: Path) -> None:
    default, other = _runs(project, ".todoflow/runs"), _runs(project, "other")
    assert len(default) == len(other) == 1
    assert default != other
    for verb in ("status", "log", "report", "replay"):
        assert bash(project, verb, "") == default, verb
        assert bash(project, verb, "--run-dir", "other", "") == other, verb
    assert bash(project, "run", "--resume", "") == default
    assert bash(project, "run", "--run-dir", "other", "--resume", "") == other
    assert bash(project, "status", "--run-dir", "missing", "") == []
    assert bash(project, "status", "--store", "postgresql://127.0.0.1:1/none", "") == []


def test_the_helper_lists_run_ids_and_never_an_error(project: Path) -> None:
    listed = run_cli("__complete", "runs", "--run-dir", "other", cwd=project)
    assert (listed.returncode, listed.stdout, listed.stderr) == (
        0,
        "".join(f"{r}\n" for r in _runs(project, "other")),
        "",
    )
    for words in (["runs", "--store", "mysql://nope"], ["nonsense"], []):
        quiet = run_cli("__complete", *words, cwd=project)
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", ""), words


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (make setup installs it)")
def test_zsh_runs_the_same_function_through_bashcompinit(project: Path) -> None:
    script = _script("zsh", project.parent)
    assert subprocess.run(["zsh", "-n", str(script)], capture_output=True, check=False).returncode == 0
    # zsh's compgen leaves matching the word to zsh (compadd), so the harness matches
    # by prefix as compadd would, and sets PREFIX as the completion system does
    program = (
        f"autoload -U compinit && compinit -u -d '{project.parent}/zcompdump'; source '{script}'; "
        "show() { emulate -L sh; setopt ksharrays; PREFIX=${@: -1}; COMP_WORDS=(" + TODOFLOW + ' "$@"); '
        "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _todoflow; "
        'for w in "${COMPREPLY[@]}"; do case $w in "$PREFIX"*) print -r -- "$w";; esac; done; '
        "print -- --; }; "
        'show ch; show check --format ""; show check flows/; show status ""; show status --run-dir other ""'
    )
    result = subprocess.run(
        ["zsh", "-c", program], cwd=project, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    blocks = [b.split() for b in result.stdout.split("--\n")][:5]
    assert blocks == [
        ["check"],
        ["text", "json", "sarif", "github"],
        ["flows/release.todoflow"],
        _runs(project, ".todoflow/runs"),
        _runs(project, "other"),
    ]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (make setup installs it)")
def test_fish_completes_with_its_own_complete_commands(project: Path) -> None:
    script = _script("fish", project.parent)
    assert subprocess.run(["fish", "-n", str(script)], capture_output=True, check=False).returncode == 0

    def fish(line: str) -> list[str]:
        result = subprocess.run(
            ["fish", "--no-config", "-c", f"source '{script}'; complete -C '{line}'"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PATH": f"{Path(TODOFLOW).parent}:/usr/bin:/bin", "HOME": str(project.parent)},
        )
        assert result.returncode == 0, result.stderr
        return [w.split("\t")[0] for w in result.stdout.splitlines()]

    assert fish("todoflow ch") == ["check"]
    assert fish("todoflow check --format ") == ["github", "json", "sarif", "text"]
    assert fish("todoflow check flows/") == ["flows/release.todoflow"]
    assert fish("todoflow learnings ") == ["list", "retire", "show"]
    assert fish("todoflow status ") == _runs(project, ".todoflow/runs")
    assert fish("todoflow status --run-dir other ") == _runs(project, "other")
    assert "--quiet" in fish("todoflow check --")
