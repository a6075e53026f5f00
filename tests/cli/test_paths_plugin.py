"""`todoflow_paths` as an author meets it: a fresh project, pytest in a subprocess. The
docs' example passes on every path; an engine broken on purpose fails them, naming the
invariant; a prompt that breaks only on some paths fails those, as docs/testing.md shows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ..cli.test_pytest_plugin import _pytest
from ..conftest import ROOT

DOCS = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
TEST = next(body for body in re.findall(r"```python\n(.*?)```\n", DOCS, re.S) if "todoflow_paths" in body)

# An engine that applies a confirmation again to the next todo: put in place of the real one.
DOUBLE = """
import pytest

from todoflow.runtime.agents import walk
from todoflow.runtime.engine import Engine


class ConfirmsTwice(Engine):
    def step(self, attempt, data, by="agent", usage=()):
        directive = super().step(attempt, data, by, usage)
        state = directive.state
        if "evidence" in data and state.node == "work" and 1 < state.position <= state.total:
            return super().step(directive.attempt_id, data, by)
        return directive


@pytest.fixture(autouse=True)
def broken_engine(monkeypatch):
    monkeypatch.setattr(walk, "Engine", ConfirmsTwice)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows").mkdir()
    (tmp_path / "tests").mkdir()
    for name in ("release.todoflow", "orchestrated.todoflow"):
        shutil.copy(ROOT / "examples" / name, tmp_path / "flows" / name)
    (tmp_path / "tests" / "test_paths.py").write_text(TEST)
    return tmp_path


def _failure(output: str, test_id: str) -> str:
    """The plugin's message for one test: between its header and the next one."""
    body = output.split(f"_ test_release_paths[{test_id}] _", 1)[1].split("\n", 1)[1]
    return re.split(r"^(?:_+ test_|=+ short test summary)", body, flags=re.M)[0].rstrip("\n")


def test_the_docs_example_passes_on_every_path(project: Path) -> None:
    result = _pytest(project, "--collect-only")
    ids = re.findall(r"test_release_paths\[([\w-]+)\]", result.stdout)
    assert ids[:3] == ["prepare-1", "prepare-2", "ship-1"] and len(ids) == 47
    result = _pytest(project)
    assert result.returncode == 0, result.stdout
    assert "47 passed" in result.stdout


def test_an_engine_broken_on_purpose_fails_the_paths_naming_the_invariant(project: Path) -> None:
    (project / "tests" / "conftest.py").write_text(DOUBLE)
    result = _pytest(project)
    assert result.returncode == 1
    failed = re.findall(r"^FAILED tests/test_paths\.py::test_release_paths\[([\w-]+)\]", result.stdout, re.M)
    assert len(failed) == 47  # every path confirms a second todo in `ship`
    message = _failure(result.stdout, "ship-1")
    assert message == (
        "flows/release.todoflow: a confirmation is applied exactly once: broken at `confirm 1` of step "
        "`ship` on path ship-1: the event journaled confirm, confirm\n"
        "the path in step `ship`: intake, confirm 1, confirm 2, confirm 3, confirm 4"
    )


def test_a_prompt_that_breaks_on_some_paths_fails_those_as_the_docs_show(project: Path) -> None:
    flow = project / "flows" / "release.todoflow"
    prompt = re.search(r"`(prompt orchestrator_user .*?)`,\n", DOCS)
    assert prompt is not None
    flow.write_text(
        flow.read_text().replace(
            "        mode learn_code\n", f"        mode learn_code\n        {prompt.group(1)}\n"
        )
    )
    result = _pytest(project)
    failed = re.findall(r"^FAILED tests/test_paths\.py::test_release_paths\[([\w-]+)\]", result.stdout, re.M)
    assert "ship-2" in failed and "ship-1" not in failed and "prepare-1" not in failed
    shown = re.search(r"```text\n(flows/release\.todoflow: every directive.*?)```\n", DOCS, re.S)
    assert shown is not None
    assert _failure(result.stdout, "ship-2") == shown.group(1).rstrip("\n")


def test_a_flow_that_does_not_compile_fails_with_its_diagnostics(project: Path) -> None:
    (project / "flows" / "release.todoflow").write_text(
        'workflow w "W" {\n    regular a "A" {\n        next b\n    }\n}\n'
    )
    result = _pytest(project)
    assert result.returncode == 1
    assert "test_release_paths[no-paths]" in result.stdout
    assert "flows/release.todoflow does not compile:" in result.stdout
    assert "error[" in result.stdout


def test_one_step_and_more_revisions(project: Path) -> None:
    (project / "tests" / "test_paths.py").write_text(
        "from todoflow.pytest_plugin import todoflow_paths\n\n\n"
        '@todoflow_paths("flows/release.todoflow", step="prepare")\n'
        "def test_prepare(todoflow_path):\n    pass\n\n\n"
        '@todoflow_paths("flows/release.todoflow", "flows/orchestrated.todoflow", max_revisions=2)\n'
        "def test_both(todoflow_path):\n"
        "    assert todoflow_path.walk().taken[-1].status == 'complete'\n"
    )
    result = _pytest(project, "--collect-only")
    assert "test_prepare[prepare-1]" in result.stdout and "test_prepare[prepare-2]" in result.stdout
    assert "test_prepare[ship-1]" not in result.stdout
    assert (
        "test_both[release:ship-1]" in result.stdout and "test_both[orchestrated:publish-1]" in result.stdout
    )
    revised = re.findall(r"test_both\[orchestrated:publish-\d+\]", result.stdout)
    assert len(revised) > 46  # two revisions make more paths than one
    result = _pytest(project)
    assert result.returncode == 0, result.stdout
