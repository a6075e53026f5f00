"""What a new user tripped over in runs (issue 12) and what an attack run found in them
(issue 11): each test failed before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import ROOT, run_cli
from .runtime_helpers import read_journal

EXAMPLE = ROOT / "examples" / "release.todoflow"
FLOW = 'workflow w "W" {\n    todo_task t "T" {\n        description "Tidy up."\n    }\n}\n'


def _runs(folder: Path) -> list[Path]:
    return sorted((folder / ".todoflow" / "runs").iterdir())


def _script(folder: Path, text: str) -> Path:
    path = folder / "replies.yaml"
    path.write_text(text)
    return path


def test_resume_reuses_the_recorded_agent_and_the_hint_works_when_pasted(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    script = _script(
        tmp_path,
        "- tasks: [{action: a, expected_result: a done}, {action: b, expected_result: b done}]\n"
        "  progress_checklist_outcome: two\n"
        "- {evidence: did a, progress_execution_outcome: a ok}\n",
    )
    first = run_cli("run", "flow.todoflow", "--agent", f"scripted:{script.name}", cwd=tmp_path)
    assert first.returncode == 3  # the script ran out: stopped, resumable
    hint = next(line for line in first.stderr.splitlines() if line.startswith("resume with: "))
    script.write_text(script.read_text() + "- {evidence: did b, progress_execution_outcome: b ok}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_dir = str(tmp_path / ".todoflow" / "runs")
    args = hint.removeprefix("resume with: todoflow ").split()
    args[args.index("--run-dir") + 1] = run_dir  # pasted from another folder: the run folder given
    resumed = run_cli(*args, cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # the scripted agent, not a human


def test_a_scripted_block_is_journaled_and_resuming_continues_after_it(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    script = _script(
        tmp_path,
        "- tasks: [{action: a, expected_result: a done}]\n"
        "  progress_checklist_outcome: one\n"
        "- blocked: waiting for the build machine\n"
        "- {evidence: did a, progress_execution_outcome: a ok}\n",
    )
    first = run_cli("run", "flow.todoflow", "--agent", f"scripted:{script}", cwd=tmp_path)
    assert first.returncode == 3 and "blocked: waiting for the build machine" in first.stdout
    (run,) = _runs(tmp_path)
    rows = json.loads(run_cli("status", "--json", cwd=tmp_path).stdout)
    assert rows[0]["status"] == "blocked"
    todos = json.loads((run / "todos" / "t.json").read_text())
    assert (
        todos["todos"][0]["status"] == "blocked"
        and todos["todos"][0]["notes"] == "waiting for the build machine"
    )
    second = run_cli("run", "--resume", run.name, cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert [e["type"] for e in read_journal(run)] == ["submit_tasks", "update_todo", "confirm"]


def test_tasks_replacing_a_compiled_tasks_block_is_said_before_work_starts(tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text(json.dumps([{"action": "x", "expected_result": "y"}]))
    result = run_cli(
        "run", str(EXAMPLE), "--tasks", "tasks.json", "--agent", "human", stdin="quit\n", cwd=tmp_path
    )
    assert (
        "note: step `ship`: the given checklist (1 task) replaces the step's own `tasks` block (4 tasks)"
        in (result.stderr)
    )


def test_one_vocabulary_of_run_states(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    run_cli("run", "flow.todoflow", "--agent", "human", stdin="", cwd=tmp_path)  # stops at intake
    listing = run_cli("status", cwd=tmp_path)
    rows = json.loads(run_cli("status", "--json", cwd=tmp_path).stdout)
    (run,) = _runs(tmp_path)
    card = json.loads(run_cli("status", run.name, "--json", cwd=tmp_path).stdout)
    assert rows[0]["status"] == card["status"] == "stopped" and " stopped " in listing.stdout
    done = run_cli(
        "run",
        str(EXAMPLE),
        "--agent",
        f"scripted:{ROOT / 'examples' / 'replies' / 'release.yaml'}",
        cwd=tmp_path,
    )
    assert done.returncode == 0
    states = {row["status"] for row in json.loads(run_cli("status", "--json", cwd=tmp_path).stdout)}
    assert states == {"stopped", "complete"}


def test_the_completed_card_counts_in_words(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    result = run_cli("run", str(flow), "--agent", "human", stdin="done\nok\n", cwd=tmp_path)
    assert "Complete: 1 step done; result {}" in result.stdout


def test_the_journal_can_be_read_line_by_line(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    script = _script(
        tmp_path, "- tasks: [{action: a, expected_result: a done}]\n  progress_checklist_outcome: one\n"
    )
    run_cli("run", "flow.todoflow", "--agent", f"scripted:{script}", cwd=tmp_path)
    (run,) = _runs(tmp_path)
    lines = run_cli("log", run.name, "--journal", cwd=tmp_path).stdout.splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["submit_tasks"]
    data = (run / "journal.jsonl").read_bytes()  # as docs/runtime.md says to read the file itself
    assert [json.loads(line)["type"] for line in data[: data.index(b"\0")].splitlines()] == ["submit_tasks"]


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ('{"../outside.txt": x}', "the script writes `../outside.txt` resolves outside the workspace"),
        ('{"/etc/passwd-copy": x}', "resolves outside the workspace"),
        ("[a, b]", "`files` maps workspace paths to contents, not list"),
        ('{"": x}', "`files` has a name that is not a path"),
        ('{"link/out.txt": x}', "`link/out.txt` resolves outside the workspace"),
    ],
)
def test_scripted_files_stay_in_the_workspace(tmp_path: Path, files: str, problem: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link").symlink_to(tmp_path)  # a link out of the workspace
    (tmp_path / "flow.todoflow").write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    script = _script(tmp_path, f"- files: {files}\n  evidence: e\n  progress_execution_outcome: o\n")
    result = run_cli(
        "run", "flow.todoflow", "--agent", f"scripted:{script}", "--workspace", "ws", cwd=tmp_path
    )
    assert result.returncode == 1 and problem in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "out.txt").exists()


def test_a_replies_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    (tmp_path / "replies.yaml").write_bytes(b"- evidence: \xff\xfe\n")
    result = run_cli("run", "flow.todoflow", "--agent", "scripted:replies.yaml", cwd=tmp_path)
    assert result.returncode == 1 and "replies.yaml is not UTF-8 text" in result.stderr


def test_an_expected_file_that_is_a_link_out_of_the_workspace_does_not_count(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", workspace / "out.txt")
    (tmp_path / "flow.todoflow").write_text(
        'workflow w "W" {\n    regular a "A" {\n        expect file "out.txt"\n    }\n}\n'
    )
    script = _script(tmp_path, "- {evidence: e, progress_execution_outcome: o}\n")
    result = run_cli(
        "run", "flow.todoflow", "--agent", f"scripted:{script}", "--workspace", "ws", cwd=tmp_path
    )
    assert result.returncode == 1
    assert "its expected file `out.txt` resolves outside the workspace" in result.stdout
