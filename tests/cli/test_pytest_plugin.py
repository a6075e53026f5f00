"""The pytest plugin as an author meets it: a fresh project, pytest run in a subprocess.
Readable snapshots, one per artifact; comment edits pass; `after` changes show; the
whole diff without `-vv`; no "unused" noise; a clear word when syrupy is missing; and
the failure docs/testing.md shows is what the plugin prints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.slow  # each test runs pytest in a subprocess
TEST = 'def test_release_flow(todoflow_snapshot):\n    todoflow_snapshot("flows/release.todoflow")\n'
SNAPSHOTS = Path("tests/__snapshots__/test_flows")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows").mkdir()
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "examples" / "release.todoflow", tmp_path / "flows" / "release.todoflow")
    (tmp_path / "tests" / "test_flows.py").write_text(TEST)
    written = _pytest(tmp_path, "--snapshot-update")
    assert written.returncode == 0, written.stdout
    return tmp_path


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _edit(project: Path, old: str, new: str) -> None:
    flow = project / "flows" / "release.todoflow"
    text = flow.read_text()
    assert old in text
    flow.write_text(text.replace(old, new))


def _failure(output: str) -> str:
    """The plugin's message: what pytest prints between the test's header and the reports."""
    body = output.split("_ test_release_flow _", 1)[1].split("\n", 1)[1]
    return re.split(r"^(?:-+ snapshot report|=+ short test summary)", body, flags=re.M)[0].rstrip("\n")


def test_each_artifact_is_a_readable_file_of_its_own(project: Path) -> None:
    names = sorted(p.name for p in (project / SNAPSHOTS).iterdir())
    assert names == [
        "test_release_flow[machine].md",
        "test_release_flow[ordering].txt",
        "test_release_flow[plan].json",
        "test_release_flow[step_config].json",
    ]
    plan = (project / SNAPSHOTS / "test_release_flow[plan].json").read_text()
    assert plan.startswith('{\n  "steps": [\n') and "source_sha256" not in plan
    ordering = (project / SNAPSHOTS / "test_release_flow[ordering].txt").read_text()
    assert "  3. tag: Tag the release => git tag v2.0 exists\n       after build, notes\n" in ordering
    assert "notes:\n  task `tag` moved after `notes`: it needs `notes`\n" in ordering


def test_an_edit_of_comments_alone_passes(project: Path) -> None:
    _edit(project, "workflow release", "# a comment of our own\nworkflow release")
    result = _pytest(project)
    assert result.returncode == 0, result.stdout


def test_a_changed_result_shows_its_whole_diff_and_nothing_unused(project: Path) -> None:
    _edit(project, '"dist/ holds both files"', '"dist/ holds the wheel and the sdist"')
    result = _pytest(project)
    assert result.returncode == 1
    failure = _failure(result.stdout)
    assert failure.startswith("flows/release.todoflow: 2 artifacts differ from the snapshots")
    assert '-          "expected_result": "dist/ holds both files",\n' in failure
    assert '+          "expected_result": "dist/ holds the wheel and the sdist",\n' in failure
    assert "+  1. build: Build wheels and sdist => dist/ holds the wheel and the sdist\n" in failure
    assert "unused" not in result.stdout and "-vv" not in result.stdout


def test_the_failure_in_the_docs_is_what_the_plugin_prints(project: Path) -> None:
    _edit(
        project,
        '"The announcement is archived" after tag\n',
        '"The announcement is archived" after tag, notes\n',
    )
    result = _pytest(project)
    docs = (ROOT / "docs" / "testing.md").read_text()
    shown = re.search(r"```text\n(flows/release\.todoflow: .*?)```\n", docs, re.S)
    assert shown is not None
    assert _failure(result.stdout) == shown.group(1).rstrip("\n")


def test_a_missing_snapshot_says_so(project: Path) -> None:
    (project / SNAPSHOTS / "test_release_flow[ordering].txt").unlink()
    result = _pytest(project)
    assert _failure(result.stdout).endswith("\n\nordering: no snapshot yet")


def test_without_syrupy_the_fixture_says_what_to_install(project: Path) -> None:
    result = _pytest(project, "-p", "no:syrupy")
    assert result.returncode == 1
    assert "todoflow_snapshot compares artifacts with syrupy's `snapshot` fixture" in result.stdout
    assert "pip install syrupy" in result.stdout
    assert "fixture 'snapshot' not found" not in result.stdout


def test_a_workflow_path_is_found_beside_the_test_then_in_the_rootdir(project: Path) -> None:
    """Issue 26: pytest started from another folder still finds the workflow."""
    (project / "tests" / "flows").mkdir()
    shutil.copy(project / "flows" / "release.todoflow", project / "tests" / "flows" / "release.todoflow")
    (project / "pytest.ini").write_text("[pytest]\n")
    started_elsewhere = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(project), "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert started_elsewhere.returncode == 0, started_elsewhere.stdout  # beside the test
    shutil.rmtree(project / "tests" / "flows")
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_flows.py"],
        cwd=project / "tests",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert inner.returncode == 0, inner.stdout  # from the tests folder: found in the rootdir
