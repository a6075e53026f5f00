"""Issue 26 item 9: every verb that says what it did says it as JSON on stdout with
`--format json` (`--json` its alias) — `run`, `compile` and `db` too — while what people
read (progress, prompts, summaries) goes to stderr, so stdout parses."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ..conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "release.todoflow"
REPLIES = ROOT / "examples" / "replies" / "release.yaml"
FLOW = """\
workflow w "W" {
    todo_task t "T" {
        tasks {
            a: "Do A" => "A done"
            b: "Do B" => "B done"
        }
    }
}
"""


def _run_folder(folder: Path) -> Path:
    (run,) = (folder / ".todoflow" / "runs").iterdir()
    return run


def test_run_prints_its_final_state_as_status_shows_it(tmp_path: Path) -> None:
    result = run_cli("run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ended = json.loads(result.stdout)  # the card and the progress lines went to stderr
    assert "-> complete: result {}" in result.stderr
    run = _run_folder(tmp_path)
    status = json.loads(run_cli("status", run.name, "--json", cwd=tmp_path).stdout)
    assert ended == status | {"outcome": "complete", "reason": None, "resume": None}
    assert ended["process_id"] == run.name and ended["status"] == "complete"
    assert ended["location"] == str(Path(".todoflow/runs") / run.name)
    assert [t["state"] for t in ended["checklist"]["tasks"]] == ["done"] * 5


def test_a_stopped_run_says_where_it_stopped_and_how_to_resume(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    typed = "did A\nA done\nblocked waiting for the build machine\n"  # task 1 (evidence, outcome), a block
    result = run_cli("run", "flow.todoflow", "--agent", "human", "--json", stdin=typed, cwd=tmp_path)
    assert result.returncode == 3
    ended = json.loads(result.stdout)  # the person's prompts are on stderr
    assert "evidence>" in result.stderr and "evidence>" not in result.stdout
    run = _run_folder(tmp_path)
    assert ended["status"] == ended["outcome"] == "blocked"
    assert ended["blocked"] == ended["reason"] == "waiting for the build machine"
    assert ended["prepare"]["cursor"] == 2
    assert [t["state"] for t in ended["checklist"]["tasks"]] == ["done", "current"]
    assert ended["resume"] == f"todoflow run --resume {run.name} --run-dir .todoflow/runs"
    assert f"resume with: {ended['resume']}" in result.stderr


def test_a_refused_script_says_why_in_the_json(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    (tmp_path / "replies.yaml").write_text(
        "replies:\n  - {update_todo: {todo_id: todo_9, status: in_progress}}\n"
    )
    result = run_cli("run", "flow.todoflow", "--agent", "scripted:replies.yaml", "--json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    ended = json.loads(result.stdout)
    assert ended["outcome"] == "refused" and ended["status"] == "stopped" and ended["blocked"] is None
    assert ended["reason"] == "there is no `todo_9`: the checklist holds todo_1 to todo_2"
    assert f"refused: {ended['reason']}" in result.stderr


def test_compile_lists_what_it_wrote_with_each_files_sha256(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("compile", str(EXAMPLE), "-o", str(out), "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = json.loads(result.stdout)
    assert f"compiled {EXAMPLE}: " in result.stderr
    assert written["folder"] == str(out) and written["source"] == str(EXAMPLE)
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert sorted(f["path"] for f in written["files"]) == on_disk
    for file in written["files"]:
        assert file["sha256"] == hashlib.sha256((out / file["path"]).read_bytes()).hexdigest(), file
    again = json.loads(run_cli("compile", str(EXAMPLE), "-o", str(out), "--json", cwd=tmp_path).stdout)
    assert again == written | {"removed": [], "kept": []}


def test_compile_to_stdout_takes_no_json(tmp_path: Path) -> None:
    result = run_cli("compile", str(EXAMPLE), "-o", "-", "--json", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "`-o -` writes plan.json to stdout; --format json needs a folder" in result.stderr


@pytest.mark.slow  # PostgreSQL
def test_db_verbs_say_what_they_did_as_json(tmp_path: Path, pg_url: str) -> None:
    migrated = run_cli("db", "migrate", "--store", pg_url, "--format", "json", cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    said = json.loads(migrated.stdout)
    assert said["action"] == "migrate" and said["schema_version"] == said["schema_version_before"] >= 1
    assert "todoflow's schema is at version" in migrated.stderr
    assert run_cli("run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}", cwd=tmp_path).returncode == 0
    run = _run_folder(tmp_path)
    imported = run_cli("db", "import", run.name, "--store", pg_url, "--json", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == {
        "action": "import",
        "process_id": run.name,
        "from": ".todoflow/runs",
        "to": json.loads(run_cli("status", run.name, "--store", pg_url, "--json").stdout)["location"],
    }


def test_every_verb_with_json_output_takes_the_alias() -> None:
    """One spelling: a verb whose --format offers `json` takes `--json` as its alias."""
    from todoflow.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command")
    verbs = dict(commands.choices or {})
    with_json = {
        name
        for name, verb in verbs.items()
        for action in verb._actions
        if "--format" in action.option_strings and "json" in (action.choices or ())
    }
    assert {"check", "compile", "db", "diff", "log", "paths", "plan", "replay", "run", "status"} <= with_json
    assert sorted(n for n in with_json if "--json" not in verbs[n]._option_string_actions) == []
    flow = str(ROOT / "examples" / "release.todoflow")
    for verb in (["plan", flow], ["paths", flow], ["check", flow], ["diff", flow, flow]):
        assert run_cli(*verb, "--json").stdout == run_cli(*verb, "--format", "json").stdout != ""
