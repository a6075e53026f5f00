"""Every example compiles, and all its artifacts are pinned: through the pytest plugin
that authors use (plan, step config, machine table, Mermaid), and file by file; every
path through its machine keeps the engine's invariants (the plugin's `todoflow_paths`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

import todoflow
from todoflow.pytest_plugin import PathCase, todoflow_paths

from ..conftest import EXAMPLES, relative, run_cli


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_through_the_plugin(path: Path, todoflow_snapshot: Callable[[Path], None]) -> None:
    todoflow_snapshot(path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_artifact_files(path: Path, snapshot: SnapshotAssertion) -> None:
    compiled = todoflow.compile(path, path=relative(path))
    compiled.raise_for_errors()
    files = dict(compiled.artifacts.files)
    others = {name: text for name, text in files.items() if not name.endswith(".json")}
    assert others == snapshot


@todoflow_paths(*EXAMPLES)
def test_example_path_keeps_the_engine_invariants(todoflow_path: PathCase) -> None:
    """Through the plugin authors use: every path of every example's machine, walked
    through the engine (which the plugin did before this body)."""
    walked = todoflow_path.walk()
    assert walked.taken[-1].status == "complete"


REPLIES = sorted((EXAMPLES[0].parent / "replies").glob("*.yaml"))


@pytest.mark.parametrize("replies", REPLIES, ids=lambda p: p.stem)
def test_example_runs_to_completion_with_its_scripted_replies(replies: Path, tmp_path: Path) -> None:
    example = replies.parent.parent / f"{replies.stem}.todoflow"
    if (replies.parent.parent / "learnings").is_dir():  # the examples' learn_code scripts
        shutil.copytree(replies.parent.parent / "learnings", tmp_path / "learnings")
    folder = [
        str(tmp_path / "runs"),
        "--workspace",
        str(tmp_path),
        "--learnings",
        str(tmp_path / "learnings"),
    ]
    done = run_cli("run", str(example), "--agent", f"scripted:{replies}", "--run-dir", *folder, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unused" not in done.stderr


def test_the_orchestrated_example_delegates_prevalidates_and_learns(tmp_path: Path) -> None:
    example = EXAMPLES[0].parent / "orchestrated.todoflow"
    replies = example.parent / "replies" / "orchestrated.yaml"
    args = [
        "--run-dir",
        str(tmp_path / "runs"),
        "--workspace",
        str(tmp_path),
        "--learnings",
        str(tmp_path / "l"),
    ]
    assert run_cli("run", str(example), "--agent", f"scripted:{replies}", *args, cwd=tmp_path).returncode == 0
    (run,) = (tmp_path / "runs").iterdir()
    log = json.loads(
        run_cli("log", run.name, "--run-dir", str(tmp_path / "runs"), "--json", cwd=tmp_path).stdout
    )
    (step,) = log["steps"]
    rows = [
        (i["iteration"], i.get("action"), i.get("agent"), i.get("validation", {}).get("passed"))
        for i in step["iterations"]
    ]
    assert rows == [
        (0, "submit_tasks", "caller", None),
        (1, "delegate", "build", False),
        (2, "delegate", "build", True),
        (3, "create_todo", "orchestrator", None),
        (4, "delegate", "check", True),
        (5, "confirm", "orchestrator", None),
        (6, "delegate", "generic", None),
    ]
    learned = run_cli("learnings", "list", "--learnings", str(tmp_path / "l"), "--json", cwd=tmp_path)
    assert [r["sub_step_id"] for r in json.loads(learned.stdout)] == ["site-builder", "link-checker"]
    todos = json.loads((run / "todos" / "publish.json").read_text())
    assert [t.get("assigned_agent") for t in todos["todos"]] == ["build", "check", None, "generic"]
