"""Configured secrets never reach a run's records: a model server that echoes the key it
was sent puts it in every argument it can, and the key appears in no file of the run
folder, the learnings, the report, `log`, `status`, `learnings list`, or the program's
own output, on the folder store and on PostgreSQL (issue 21, item 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime import entries as redaction  # the secrets no entry may hold
from todoflow.runtime.entries import Confirm, SubmitTasks
from todoflow.runtime.plan import Task

from ..conftest import run_cli
from ..support.fake_model import ECHO_KEY, FakeModel

SECRET = "sk-echo-0123456789-never-journaled"
FLOW = """\
workflow w "W" {
    llm fake "orchestrator-model"
    todo_task build "Build" {
        description "Build and document the app."
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/app."
                expect file "dist/app"
                llm fake "compiler-model"
            }
        }
        tasks {
            "Compile it" => "dist/app exists"
            "Document it" => "README.md says how to run the app"
        }
    }
}
"""


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


ECHOING = [
    _call(
        "submit_todo_task_result",
        next_action="delegate",
        selected_route_id="compile",
        todo_id_to_execute="todo_1",
        instructions_to_sub_agent=f"Build with the key {ECHO_KEY}.",
        success_criteria_for_sub_agent=f"dist/app exists ({ECHO_KEY})",
        selection_reasoning=f"the key is {ECHO_KEY}",
        progress_summary=ECHO_KEY,
    ),
    _call("complete_todo", result=f"built with {ECHO_KEY}", evidence=f"my key: {ECHO_KEY}"),
    _call("update_todo", todo_id="todo_2", status="in_progress", notes=f"{ECHO_KEY}{ECHO_KEY}"),
    _call("complete_todo", todo_id="todo_2", result="README written", evidence=f"key={ECHO_KEY}"),
]


def test_redaction_replaces_exact_occurrences_in_any_value() -> None:
    entry = Confirm(
        seq=3, at="t", by="agent", step="s", position=0, evidence="a", progress_execution_outcome="b"
    )
    assert redaction.redacted(entry) is entry  # nothing kept: the very same value
    redaction.keep("hunter2-long", "", None, "abc")  # empty and short values are not secrets
    assert redaction.redacted(entry) is entry
    leaky = SubmitTasks(
        seq=1,
        at="t",
        by="agent",
        step="s",
        tasks=(Task("use hunter2-long", "ok"), Task("plain", "ok")),
        progress_checklist_outcome="x hunter2-long y hunter2-longer",
    )
    clean = redaction.redacted(leaky)
    assert clean.tasks is not None and clean.tasks[0].action == "use [redacted]"
    assert clean.tasks[1] is leaky.tasks[1]  # type: ignore[index]
    assert clean.progress_checklist_outcome == "x [redacted] y [redacted]er"
    assert redaction.redacted({"k": ["hunter2-long", 1]}) == {"k": ["[redacted]", 1]}
    assert redaction.redact("hunter2 abc") == "hunter2 abc"


def _run_echoing(tmp_path: Path, where: list[str]) -> list[str]:
    """Run FLOW with the LLM agent against a server echoing its key; the outputs of the
    run and of every verb that shows it."""
    workspace = tmp_path / "workspace"
    (workspace / "dist").mkdir(parents=True)
    (workspace / "dist" / "app").write_text("binary")
    (tmp_path / "flow.todoflow").write_text(FLOW)
    env = {"FAKE_KEY": SECRET}
    with FakeModel(list(ECHOING)) as fake:
        (tmp_path / "todoflow.toml").write_text(
            f'[llm.providers.fake]\nbase_url = "{fake.url}"\napi_key_env = "FAKE_KEY"\n'
        )
        ran = run_cli(
            "run",
            "flow.todoflow",
            "--agent",
            "llm",
            "--workspace",
            str(workspace),
            *where,
            cwd=tmp_path,
            env=env,
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert fake.unused() == 0 and fake.requests[-1]["authorization"] == f"Bearer {SECRET}"
    (row,) = json.loads(run_cli("status", "--json", *where, cwd=tmp_path).stdout)
    pid = row["process_id"]
    shown = [
        run_cli("status", *where, cwd=tmp_path),
        run_cli("status", pid, *where, cwd=tmp_path),
        run_cli("log", pid, *where, cwd=tmp_path),
        run_cli("log", pid, "--json", *where, cwd=tmp_path),
        run_cli("report", pid, "-o", "-", *where, cwd=tmp_path),
        run_cli("learnings", "list", "--json", *where, cwd=tmp_path),
    ]
    assert all(done.returncode == 0 for done in shown), [done.stderr for done in shown]
    assert "[redacted]" in shown[2].stdout
    return [ran.stdout, ran.stderr, *(done.stdout + done.stderr for done in shown)]


def _files_holding(folder: Path, text: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_an_echoed_key_reaches_no_record_of_a_run_folder(tmp_path: Path) -> None:
    outputs = _run_echoing(tmp_path, [])
    assert not [text for text in outputs if SECRET in text]
    assert not _files_holding(tmp_path, SECRET)
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    journal = (run / "journal.jsonl").read_text()
    assert "my key: [redacted]" in journal and "[redacted][redacted]" in journal
    assert "[redacted]" in (run / "events.jsonl").read_text()
    learned = json.loads(run_cli("learnings", "list", "--json", cwd=tmp_path).stdout)
    assert learned and "[redacted]" in json.dumps(learned)


@pytest.mark.slow
def test_an_echoed_key_reaches_no_record_in_the_database(tmp_path: Path, pg_url: str) -> None:
    import psycopg
    from psycopg import sql

    outputs = _run_echoing(tmp_path, ["--store", pg_url])
    assert not [text for text in outputs if SECRET in text]
    assert not _files_holding(tmp_path, SECRET)
    with psycopg.connect(pg_url) as connection:
        tables = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
        rows = [
            connection.execute(sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(name))).fetchall()
            for (name,) in tables
        ]
    stored = json.dumps(rows)
    assert "my key: [redacted]" in stored and SECRET not in stored
