"""`todoflow migrate`, beyond the seed's script: what it leaves nested is said, conflicts
are listed on every run and exit 1, step ids that would name paths are refused, every
learnings rename stays inside the learnings folder, and a rename that fails midway
leaves everything as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from todoflow import TodoflowError
from todoflow.compiler.migrate import apply, plan_migration

from ..conftest import FIXTURES, ROOT, run_cli
from ..support.runtime_helpers import folder_digest

LEGACY = FIXTURES / "legacy"


def _copy(case: str, tmp: Path) -> Path:
    shutil.copytree(LEGACY / case, tmp / case)
    return tmp / case


def _nested(step_id: str, inner_id: str, **outer: Any) -> dict[str, Any]:
    inner = {"type": "regular", "id": inner_id, "description": f"{step_id} inside"}
    return {"type": "todo_task", "id": step_id, "title": step_id.title(), "todo_task_step": inner, **outer}


def _write_plan(folder: Path, *steps: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    plan = folder / "plan.json"
    plan.write_text(json.dumps({"steps": list(steps)}, indent=2) + "\n")
    return plan


def test_a_flat_step_whose_sub_agent_is_still_nested_is_said_and_kept(tmp_path: Path) -> None:
    sub = _nested("cleaner", "cleaner-inner")
    route = {"route_id": "clean", "route_name": "Clean", "condition": "to clean", "sub_agent_step": sub}
    plan = _write_plan(
        tmp_path, {"type": "todo_task", "id": "top", "title": "Top", "predefined_routes": [route]}
    )
    before = plan.read_bytes()
    seed = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "seed_migrate_plan.py"), str(plan)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "already in flat format" in seed.stdout and plan.read_bytes() == before
    result = run_cli("migrate", "plan.json", "--write", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "plan.json already in flat format\n"
        "warning: plan.json: steps[0].predefined_routes[0].sub_agent_step (`cleaner`) still holds a "
        "todo_task_step: the seed's script leaves the routes of a flat step as they are, and so does migrate "
        "(every reader flattens it on the way in)\n"
    )
    assert plan.read_bytes() == before


@pytest.mark.parametrize("case", ["partial-outer", "nested-deep"])
def test_conflicts_are_listed_on_every_run_and_exit_1(case: str, tmp_path: Path) -> None:
    folder = _copy(case, tmp_path)
    learnings = ["--learnings", "learnings"] if (folder / "learnings").exists() else []
    runs = [
        run_cli("migrate", "plan.json", *learnings, *flags, cwd=folder) for flags in ([], ["--write"], [])
    ]
    for result in runs:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "conflict: " in result.stdout
        assert "Traceback" not in result.stderr
    assert runs[2].stdout.startswith("plan.json already in flat format\nconflict: ")


def test_once_a_conflict_is_resolved_by_hand_migrate_is_clean(tmp_path: Path) -> None:
    folder = _copy("partial-outer", tmp_path)
    assert run_cli("migrate", "plan.json", "--write", cwd=folder).returncode == 1
    config = json.loads((folder / "step_config.json").read_text())
    config["steps"] = [e for e in config["steps"] if e["id"] != "my-orchestrator"]
    (folder / "step_config.json").write_text(json.dumps(config))
    again = run_cli("migrate", "plan.json", cwd=folder)
    assert (again.returncode, again.stdout) == (0, "plan.json already in flat format\n")


@pytest.mark.parametrize(
    ("outer", "inner", "bad"),
    [
        ("../../outside/pwned", "pwned-inner", "../../outside/pwned"),
        ("victim-owner", "../../victim", "../../victim"),
        ("a/b", "ab-inner", "a/b"),
        ("/etc", "etc-inner", "/etc"),
        ("nul", "nul\u0000inner", "nul\\u0000inner"),
        ("dots", "..", ".."),
    ],
)
def test_step_ids_that_name_paths_are_refused_and_nothing_moves(
    outer: str, inner: str, bad: str, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    _write_plan(project, _nested(outer, inner))
    for name in ("pwned-inner", "ab-inner", "etc-inner", "dots"):
        (project / "learnings" / name).mkdir(parents=True)
        (project / "learnings" / name / "notes.md").write_text("mine\n")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "data.txt").write_text("not yours\n")
    before = folder_digest(tmp_path)
    for flags in ([], ["--write"]):
        result = run_cli("migrate", "plan.json", "--learnings", "learnings", *flags, cwd=project)
        assert result.returncode == 1
        assert "error[E0508]: steps[0]" in result.stderr and f"`{bad}` is not a plain name" in result.stderr
        assert "nothing written" in result.stderr and " -> " not in result.stdout
    assert folder_digest(tmp_path) == before


def test_a_learnings_folder_that_links_out_is_never_renamed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _write_plan(project, _nested("orchestrate", "orchestrate-inner"))
    (tmp_path / "elsewhere").mkdir()
    (project / "learnings").mkdir()
    (project / "learnings" / "orchestrate-inner").symlink_to(tmp_path / "elsewhere")
    before = folder_digest(tmp_path)
    result = run_cli("migrate", "plan.json", "--learnings", "learnings", "--write", cwd=project)
    assert result.returncode == 1
    assert "learnings/orchestrate-inner leads out of learnings (a symbolic link)" in result.stderr
    assert folder_digest(tmp_path) == before
    assert (project / "learnings" / "orchestrate-inner").is_symlink()


def test_a_rename_that_fails_midway_leaves_everything_as_it_was(tmp_path: Path) -> None:
    project = tmp_path / "project"
    plan = _write_plan(project, _nested("one", "one-inner"), _nested("two", "two-inner"))
    (project / "step_config.json").write_text('{"steps": [{"id": "one-inner", "agent_configs": {}}]}\n')
    for name in ("one-inner", "two-inner"):
        (project / "learnings" / name).mkdir(parents=True)
    migration, problems = plan_migration(plan, project / "step_config.json", project / "learnings")
    assert migration is not None, problems
    (project / "learnings" / "two").mkdir()  # appears after the plan was made
    before = folder_digest(project)
    with pytest.raises(TodoflowError, match="learnings/two exists already") as error:
        apply(migration)
    assert "nothing was changed" in str(error.value)
    assert folder_digest(project) == before
    assert sorted(p.name for p in project.iterdir()) == ["learnings", "plan.json", "step_config.json"]


def test_a_write_that_fails_midway_restores_the_renamed_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    plan = _write_plan(project, _nested("one", "one-inner"))
    (project / "learnings" / "one-inner").mkdir(parents=True)
    migration, _ = plan_migration(plan, None, project / "learnings")
    assert migration is not None
    before = folder_digest(project)
    real = os.replace

    def full_disk(source: Any, target: Any) -> None:
        if str(target).endswith("plan.json"):
            raise OSError(28, "No space left on device")
        real(source, target)

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(TodoflowError, match="No space left on device"):
        apply(migration)
    monkeypatch.undo()
    assert folder_digest(project) == before
    assert (project / "learnings" / "one-inner").is_dir() and not (project / "learnings" / "one").exists()


def test_a_step_id_too_long_for_a_file_name_is_refused(tmp_path: Path) -> None:
    # found by the fuzzer: checking for learnings/<id> raised "File name too long"
    _write_plan(tmp_path, _nested("m" * 300, "inner"))
    result = run_cli("migrate", "plan.json", "--learnings", "learnings", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "is not a plain name" in result.stderr and "at most 255 bytes" in result.stderr
