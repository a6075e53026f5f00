"""todoflow in other people's CI: the hooks of `.pre-commit-hooks.yaml` through the real
`pre-commit try-repo`, and the composite GitHub Action of `action.yml`, its `run:` steps
executed as the runner executes them, on scratch repositories the tests make.

Both install todoflow from this repository into an environment of their own (pre-commit's
hook environment; the action's venv) with no network: pip gets no index and finds the
dependencies already installed in the test environment through PYTHONPATH (todoflow
itself is built from the repository's files, so the code under test is what runs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..cli.test_packaging import tracked_copy
from ..conftest import ROOT

BROKEN = 'workflow x "X" {\n    regular a "A" { next nowhere }\n}\n'
MESSY = 'workflow y "Y" {\nregular a "A" {  description "d" }\n}\n'
TIDY = 'workflow y "Y" {\n    regular a "A" {\n        description "d"\n    }\n}\n'


def _offline(tmp_path: Path) -> dict[str, str]:
    """The environment for an install from a local folder with no index: the test
    environment's packages on PYTHONPATH, build isolation off (setuptools is one of them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    return env | {
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_CACHE_DIR": str(tmp_path / "pip-cache"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
        "VIRTUALENV_OVERRIDE_APP_DATA": str(tmp_path / "virtualenv-data"),
    }


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def _scratch_repository(folder: Path) -> Path:
    folder.mkdir()
    (folder / "flows").mkdir()
    (folder / "flows" / "broken.todoflow").write_text(BROKEN)
    (folder / "flows" / "messy.todoflow").write_text(MESSY)
    (folder / "notes.txt").write_text("not a workflow, not touched\n")
    _git(folder, "init", "-q")
    _git(folder, "add", ".")
    _git(folder, "commit", "-qm", "workflows")
    return folder


def test_the_hooks_file_is_what_pre_commit_reads() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert sorted(hooks) == ["todoflow-check", "todoflow-fmt"]
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["pass_filenames"] is True
        assert re.search(hook["files"], "a/b.todoflow")
        assert not re.search(hook["files"], "a/b.todoflow.bak")
    assert hooks["todoflow-check"]["entry"] == "todoflow check"
    assert hooks["todoflow-fmt"]["entry"] == "todoflow fmt"


@pytest.fixture(scope="module")
def repository_with_hooks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository as committed plus its working changes, as `try-repo` takes it."""
    source = tracked_copy(tmp_path_factory.mktemp("hooks"))
    _git(source, "init", "-q")
    _git(source, "add", ".")
    _git(source, "commit", "-qm", "todoflow as it is")
    return source


def _try_repo(hooks: Path, hook: str, repository: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # the hook environment is built once, by the first test, and reused as pre-commit reuses it
    env = _offline(tmp_path) | {"PRE_COMMIT_HOME": str(hooks.parent / "pre-commit-home")}
    pre_commit = Path(sys.executable).with_name("pre-commit")
    return subprocess.run(
        [str(pre_commit), "try-repo", str(hooks), hook, "--all-files", "--color", "never"],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_pre_commit_check_hook_fails_on_a_broken_workflow(
    repository_with_hooks: Path, tmp_path: Path
) -> None:
    repository = _scratch_repository(tmp_path / "project")
    result = _try_repo(repository_with_hooks, "todoflow-check", repository, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "todoflow check" in result.stdout
    assert "Failed" in result.stdout
    assert "flows/broken.todoflow:2:26: error[E0102]: `next` names `nowhere`" in result.stdout
    assert "2 files checked: 1 error" in result.stdout  # both workflows passed, nothing else


def test_pre_commit_fmt_hook_fixes_a_misformatted_workflow(
    repository_with_hooks: Path, tmp_path: Path
) -> None:
    repository = _scratch_repository(tmp_path / "project")
    (repository / "flows" / "broken.todoflow").unlink()
    _git(repository, "commit", "-qam", "only the messy one")
    result = _try_repo(repository_with_hooks, "todoflow-fmt", repository, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in result.stdout
    assert (repository / "flows" / "messy.todoflow").read_text() == TIDY
    again = _try_repo(repository_with_hooks, "todoflow-fmt", repository, tmp_path)
    assert again.returncode == 0, again.stdout
    assert "Passed" in again.stdout


# -- the GitHub Action ---------------------------------------------------------------

EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


class Runner:
    """Just enough of the Actions runner to run a composite action's `run:` steps:
    `${{ }}` over inputs, step outputs and `runner.temp`; `if: inputs.X == 'v'`; the
    steps' `$GITHUB_OUTPUT`; `bash -eo pipefail` as the runner's `shell: bash`. A
    `uses:` step is recorded with its inputs, not run (it would need GitHub)."""

    def __init__(self, action: dict[str, Any], inputs: dict[str, str], workspace: Path, env: dict[str, str]):
        declared = action["inputs"]
        assert set(inputs) <= set(declared)
        self.context: dict[str, str] = {f"inputs.{k}": str(v.get("default", "")) for k, v in declared.items()}
        self.context |= {f"inputs.{k}": v for k, v in inputs.items()}
        self.context["runner.temp"] = str(workspace.parent / "runner-temp")
        Path(self.context["runner.temp"]).mkdir(exist_ok=True)
        self.workspace, self.env = workspace, env
        self.used: list[dict[str, Any]] = []
        self.logs: list[str] = []

    def value(self, text: str) -> str:
        def known(match: re.Match[str]) -> str:
            assert match.group(1) in self.context, f"the test runner does not know `{match.group(1)}`"
            return self.context[match.group(1)]

        return EXPRESSION.sub(known, text)

    def condition(self, condition: str | None) -> bool:
        if condition is None:
            return True
        found = re.fullmatch(r"(inputs\.[\w-]+) == '([^']*)'", condition)
        assert found is not None, f"the test runner does not know the condition `{condition}`"
        return self.context[found.group(1)] == found.group(2)

    def run(self, step: dict[str, Any]) -> subprocess.CompletedProcess[str] | None:
        if not self.condition(step.get("if")):
            return None
        if "uses" in step:
            given = {k: self.value(str(v)) for k, v in step["with"].items()}
            self.used.append({"uses": step["uses"], "with": given})
            if step.get("id") == "python":  # setup-python's output: the Python it set up
                self.context["steps.python.outputs.python-path"] = sys.executable
            return None
        assert step["shell"] == "bash"
        outputs = self.workspace.parent / f"output-{len(self.logs)}"
        outputs.write_text("")
        env = self.env | {k: self.value(str(v)) for k, v in step.get("env", {}).items()}
        env["GITHUB_OUTPUT"] = str(outputs)
        assert "${{" not in step["run"], "inputs reach a script through env, never pasted into it"
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        self.logs.append(result.stdout + result.stderr)
        for line in outputs.read_text().splitlines():
            name, _, value = line.partition("=")
            self.context[f"steps.{step['id']}.outputs.{name}"] = value
        return result


def _run_action(inputs: dict[str, str], workspace: Path, tmp_path: Path) -> tuple[Runner, int]:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    runner = Runner(action, inputs, workspace, _offline(tmp_path))
    status = 0
    for step in action["runs"]["steps"]:
        result = runner.run(step)
        if result is not None and result.returncode != 0:
            status = result.returncode
            break
    return runner, status


@pytest.fixture(scope="module")
def todoflow_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The action's `version` may be any pip requirement or path: here, this repository."""
    return tracked_copy(tmp_path_factory.mktemp("action"))


def test_the_action_annotates_fails_and_writes_sarif(todoflow_source: Path, tmp_path: Path) -> None:
    workspace = _scratch_repository(tmp_path / "workspace")
    (workspace / "clean").mkdir()
    shutil.copy(ROOT / "examples" / "release.todoflow", workspace / "clean")
    inputs = {"version": str(todoflow_source), "paths": "flows\n clean", "sarif": "true"}
    runner, status = _run_action(inputs, workspace, tmp_path)
    assert status == 1  # the last step fails the job with the check's status
    assert runner.context["steps.check.outputs.status"] == "1"
    check_log = runner.logs[1]
    assert (
        "::error file=flows/broken.todoflow,line=2,col=26,endLine=2,endColumn=33,title=E0102::"
        "`next` names `nowhere`, but there is no step `nowhere`" in check_log
    )
    assert "::notice file=clean/release.todoflow" in check_log
    assert "::error file=flows/messy.todoflow,title=todoflow fmt::" in check_log
    log = json.loads((workspace / "todoflow.sarif").read_text())
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"E0102", "N0301"}
    (upload,) = [u for u in runner.used if "upload-sarif" in u["uses"]]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "todoflow.sarif"


def test_the_action_passes_clean_formatted_workflows_and_skips_sarif_unless_asked(
    todoflow_source: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "flows").mkdir(parents=True)
    (workspace / "flows" / "tidy.todoflow").write_text(TIDY)
    runner, status = _run_action({"version": str(todoflow_source), "paths": "flows"}, workspace, tmp_path)
    assert status == 0, runner.logs
    assert runner.context["steps.check.outputs.status"] == "0"
    assert not (workspace / "todoflow.sarif").exists()
    assert [u["uses"].split("@")[0] for u in runner.used] == ["actions/setup-python"]
