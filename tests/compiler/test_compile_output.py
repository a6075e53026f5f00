"""`todoflow compile -o DIR`: the folder holds exactly what this compile wrote. Files of an
earlier compile (named in its manifest) are removed; a folder holding anything else is
refused unless `--force`, which leaves those files as they are; nothing is written
outside the folder, through symbolic links or a forged manifest."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import todoflow
from todoflow.compiler.output import MANIFEST

from ..conftest import ROOT, run_cli
from ..support.runtime_helpers import folder_digest

RELEASE = ROOT / "examples" / "release.todoflow"
PIPELINE = ROOT / "examples" / "data-pipeline.todoflow"


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def _artifacts(path: Path) -> set[str]:
    return {name for name, _ in todoflow.compile(path).artifacts.files}


def test_a_second_workflow_replaces_the_first_entirely(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli("compile", str(RELEASE), "-o", str(out)).returncode == 0
    result = run_cli("compile", str(PIPELINE), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert _files(out) == _artifacts(PIPELINE) | {MANIFEST}
    assert not (out / "prompts" / "ship").exists()  # emptied folders go too
    removed = len(_artifacts(RELEASE) - _artifacts(PIPELINE))
    assert result.stderr.endswith(
        f"compiled {PIPELINE}: {len(_artifacts(PIPELINE)) + 1} files in {out} "
        f"({removed} files of an earlier compile removed)\n"
    )


def test_the_manifest_names_the_workflow_and_every_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli("compile", "examples/release.todoflow", "-o", str(out)).returncode == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest == {
        "generator": "todoflow",
        "workflow_id": "release",
        "title": "Release 2.0",
        "source": "release.todoflow",
        "source_sha256": todoflow.compile(RELEASE).workflow.source_sha256,  # type: ignore[union-attr]
        "files": sorted(_artifacts(RELEASE)),
    }


def test_compiling_again_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli("compile", str(RELEASE), "-o", str(out)).returncode == 0
    before = folder_digest(out)
    again = run_cli("compile", str(RELEASE), "-o", str(out))
    assert again.returncode == 0 and "removed" not in again.stderr
    assert folder_digest(out) == before


def test_a_folder_holding_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "todo.txt").write_text("mine\n")
    (out / "plan.json").write_text("{}\n")
    before = folder_digest(out)
    result = run_cli("compile", str(RELEASE), "-o", str(out))
    assert result.returncode == 1
    assert result.stderr.endswith(
        f"todoflow: error: {out} holds 2 files that todoflow did not write (notes/todo.txt, plan.json); "
        "compile into an empty or new folder, or pass --force to write beside them\n"
    )
    assert folder_digest(out) == before


def test_force_writes_beside_other_files_and_never_removes_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "todo.txt").write_text("mine\n")
    result = run_cli("compile", str(RELEASE), "-o", str(out), "--force")
    assert result.returncode == 0, result.stderr
    assert "1 file todoflow did not write is left as it is: todo.txt" in result.stderr
    assert (out / "todo.txt").read_text() == "mine\n"
    assert _files(out) == _artifacts(RELEASE) | {MANIFEST, "todo.txt"}
    assert json.loads((out / MANIFEST).read_text())["files"] == sorted(_artifacts(RELEASE))


def test_a_forged_manifest_removes_nothing_outside_the_folder(tmp_path: Path) -> None:
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep me\n")
    forged = {"generator": "todoflow", "files": ["../victim.txt", str(victim), "plan.json"]}
    (out / MANIFEST).write_text(json.dumps(forged))
    refused = run_cli("compile", str(RELEASE), "-o", str(out))
    assert refused.returncode == 1 and f"{out}/{MANIFEST} is not a manifest todoflow wrote" in refused.stderr
    assert run_cli("compile", str(RELEASE), "-o", str(out), "--force").returncode == 0
    assert victim.read_text() == "keep me\n"


def test_nothing_is_written_through_a_link_out_of_the_folder(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    assert run_cli("compile", str(RELEASE), "-o", str(out)).returncode == 0
    elsewhere.mkdir()
    for path in (out / "machines").iterdir():
        path.unlink()
    (out / "machines").rmdir()
    (out / "machines").symlink_to(elsewhere)
    result = run_cli("compile", str(RELEASE), "-o", str(out), "--force")
    assert result.returncode == 1
    assert f"todoflow: error: {out}/machines leads out of {out} (a symbolic link)" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_an_output_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("a file\n")
    result = run_cli("compile", str(RELEASE), "-o", str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.endswith(f"todoflow: error: {tmp_path / 'out'} is a file, not a folder\n")


def test_a_folder_compiled_before_manifests_is_recognised(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli("compile", str(RELEASE), "-o", str(out)).returncode == 0
    (out / MANIFEST).unlink()  # as todoflow 0.1 wrote it: no manifest
    result = run_cli("compile", str(PIPELINE), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert _files(out) == _artifacts(PIPELINE) | {MANIFEST}
    (out / MANIFEST).unlink()
    (out / "notes.txt").write_text("mine\n")
    refused = run_cli("compile", str(PIPELINE), "-o", str(out))
    assert refused.returncode == 1
    assert "holds 1 file that todoflow did not write (notes.txt)" in refused.stderr


@pytest.mark.slow
def test_make_demo_shows_the_broken_example_without_a_make_error() -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "demo"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error[E0002]" in result.stderr  # the diagnostics are shown
    assert "Error 1" not in result.stdout + result.stderr and "(ignored)" not in result.stdout + result.stderr
