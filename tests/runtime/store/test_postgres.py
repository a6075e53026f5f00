"""The PostgreSQL store from the outside: the same derived bytes as a run folder for the
same run, runs moved both ways without loss, the command line's `--store` and `db`
verbs, and `status --follow`."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import from_source, read_definition
from todoflow.runtime.engine import Engine
from todoflow.runtime.llm_choice import Usage
from todoflow.runtime.plan import Llm
from todoflow.runtime.store import postgres as pg_store
from todoflow.runtime.store.base import runs_at
from todoflow.runtime.views.log import log_json

from ...conftest import ROOT, run_cli
from ...support.postgres import Cluster
from ...support.runtime_helpers import Clock, confirm, intake

pytestmark = pytest.mark.slow
ORCHESTRATED = ROOT / "examples" / "orchestrated.todoflow"
REPLIES = ROOT / "examples" / "replies" / "orchestrated.yaml"
FLOW = """\
workflow w "W" {
    todo_task build "Build" {
        description "Build and document the thing."
        max_turns 8
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/."
                expect file "dist/app"
            }
        }
    }
    regular ship "Ship" {
        description "Ship it."
    }
}
"""


def _orchestrated(where: Path | str, tmp_path: Path, name: str) -> Engine:
    """examples/orchestrated.todoflow run to its end with its scripted replies, on a clock
    that gives both stores the same times."""
    workspace = tmp_path / name
    workspace.mkdir()
    definition = read_definition(ORCHESTRATED).or_raise()
    engine = process.start(
        definition,
        where,
        workspace=workspace,
        process_id="orchestrated-1",
        clock=Clock(),
        learnings=tmp_path / f"{name}-learnings",
    )
    assert drive(engine, ScriptedAgent.from_file(REPLIES, workspace), io.StringIO()) == "complete"
    return engine


def test_one_orchestration_derives_the_same_bytes_from_a_run_folder_and_from_the_database(
    tmp_path: Path, pg_url: str
) -> None:
    folder_engine = _orchestrated(tmp_path / "runs", tmp_path, "folder")
    folder_engine.close()
    db_engine = _orchestrated(pg_url, tmp_path, "db")
    db_engine.close()
    folder_log = log_json(folder_engine.plan, "orchestrated-1", "", folder_engine.store.entries())
    db_log = log_json(db_engine.plan, "orchestrated-1", "", db_engine.store.entries())
    assert db_log == folder_log
    shown = [
        run_cli("log", "orchestrated-1", "--json", *where)
        for where in (("--run-dir", str(tmp_path / "runs")), ("--store", pg_url))
    ]
    assert shown[0].returncode == shown[1].returncode == 0, shown[1].stderr
    assert shown[0].stdout == shown[1].stdout
    journal = [
        run_cli("log", "orchestrated-1", "--journal", *where).stdout
        for where in (("--run-dir", str(tmp_path / "runs")), ("--store", pg_url))
    ]
    assert journal[0] == journal[1] and journal[0].count("\n") == len(db_engine.store.entries())
    exported = tmp_path / "exported"
    result = run_cli("db", "export", "orchestrated-1", "--store", pg_url, "--run-dir", str(exported))
    assert result.returncode == 0, result.stderr
    for name in ("events.jsonl", "journal.jsonl", "todos/publish.json"):
        assert (exported / "orchestrated-1" / name).read_bytes() == (
            tmp_path / "runs" / "orchestrated-1" / name
        ).read_bytes(), name
    statuses = [
        json.loads(run_cli("status", "orchestrated-1", "--json", *where).stdout)
        for where in (("--run-dir", str(tmp_path / "runs")), ("--store", pg_url))
    ]
    locations = [status.pop("location") for status in statuses]
    assert locations == [str(tmp_path / "runs" / "orchestrated-1"), runs_at(pg_url).location]
    assert statuses[0] == statuses[1]


def _every_kind(engine: Engine, workspace: Path) -> None:
    """Steps that journal every entry kind there is."""

    def step(reply: dict[str, Any], usage: tuple[Usage, ...] = ()) -> None:
        engine.step(engine.directive().attempt_id, reply, usage=usage)

    call = Usage("orchestrator", Llm("openai", "gpt-4.1-mini"), "default", 120, 30, 450)
    step(intake("compile it", "document it"), (call,))  # llm_call, submit_tasks
    step({"teleportTo": "teleport-revise-tasks"})  # teleport
    step({**intake("compile it", "write the docs"), "resume_from_task": 1, "progress_execution_outcome": "-"})
    delegate = {
        "next_action": "delegate",
        "todo_id_to_execute": "todo_1",
        "instructions_to_sub_agent": "make",
    }
    step({**delegate, "selected_route_id": "compile"})  # delegate
    (workspace / "dist").mkdir()
    (workspace / "dist" / "app").write_text("binary")
    step({"evidence": "make printed OK", "progress_execution_outcome": "built"})  # sub_agent_done: a learning
    step({"create_todo": {"title": "Tag it", "description": "git tag v2 exists"}})  # create_todo
    step({"update_todo": {"todo_id": "todo_2", "status": "in_progress", "notes": "drafting"}})  # update_todo
    step({"next_action": "continue", "selection_reasoning": "reading the code first"})  # continue
    step({**delegate, "todo_id_to_execute": "todo_2", "use_generic_agent": True})
    step({"failed": "no docs tool"})  # sub_agent_failed
    engine.raise_turns(engine.directive().attempt_id, 20)  # raise_turns
    step(confirm(2))  # confirm
    kinds = {entry.TYPE for entry in engine.store.entries()}
    assert kinds == {
        "llm_call", "submit_tasks", "teleport", "revise", "delegate", "sub_agent_done", "create_todo",
        "update_todo", "continue", "sub_agent_failed", "raise_turns", "confirm",
    }  # fmt: skip


def _folder_files(folder: Path) -> dict[str, bytes]:
    found = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    found["journal.jsonl"] = found["journal.jsonl"].rstrip(b"\0")  # its allocated tail is no content
    found.pop("snapshot.json", None)  # derived, written every 1,000 entries
    return found


def _learning_lines(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("learnings.jsonl")}


def test_a_run_with_every_entry_kind_moves_both_ways_without_loss(
    tmp_path: Path, pg_url: str, pg_cluster: Cluster
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    learnings = tmp_path / "learnings"
    definition = from_source(FLOW, "flow.todoflow").or_raise()
    engine = process.start(
        definition,
        tmp_path / "runs",
        workspace=workspace,
        process_id="every-1",
        clock=Clock(),
        learnings=learnings,
    )
    _every_kind(engine, workspace)
    engine.close()
    original = tmp_path / "runs" / "every-1"
    before, lines = _folder_files(original), _learning_lines(learnings)
    assert lines  # the delegation's learning
    run = ["--store", pg_url, "--run-dir"]
    assert run_cli("db", "import", "every-1", *run, str(tmp_path / "runs")).returncode == 0
    (tmp_path / "runs-back").mkdir()
    for path in learnings.rglob("learnings.jsonl"):  # the database's copy is the only one now
        path.unlink()
    result = run_cli("db", "export", "every-1", *run, str(tmp_path / "runs-back"))
    assert result.returncode == 0, result.stderr
    assert _folder_files(tmp_path / "runs-back" / "every-1") == before
    assert _learning_lines(learnings) == lines
    # and back again, into another database: the same record as the first holds
    other = pg_cluster.fresh_database(pg_url.rsplit("/", 1)[1] + "_b")
    pg_store.migrate(other, create=True)
    assert (
        run_cli(
            "db", "import", "every-1", "--store", other, "--run-dir", str(tmp_path / "runs-back")
        ).returncode
        == 0
    )
    first, second = runs_at(pg_url).export("every-1"), runs_at(other).export("every-1")
    assert first == second
    runs_at(other).close()
    refused = run_cli("db", "import", "every-1", *run, str(tmp_path / "runs"))
    assert refused.returncode == 1 and "there is a run `every-1`" in refused.stderr


def test_the_command_line_runs_and_shows_runs_in_the_database(tmp_path: Path, pg_url: str) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ran = run_cli(
        "run",
        str(ORCHESTRATED),
        "--agent",
        f"scripted:{REPLIES}",
        "--store",
        pg_url,
        "--workspace",
        str(workspace),
    )
    assert ran.returncode == 0, ran.stderr
    assert "started docs-release-" in ran.stderr and "in postgresql://" in ran.stderr
    listed = run_cli("status", env={"TODOFLOW_STORE": pg_url})
    assert listed.returncode == 0 and " complete " in listed.stdout
    pid = listed.stdout.split()[0]
    assert run_cli("status", pid, "--store", pg_url).returncode == 0
    report = tmp_path / "report.html"
    made = run_cli("report", pid, "--store", pg_url, "-o", str(report))
    assert made.returncode == 0, made.stderr
    assert "Announce the release" in report.read_text()
    learned = run_cli("learnings", "list", "--store", pg_url, "--json")
    assert learned.returncode == 0 and len(json.loads(learned.stdout)) == 2  # the build and the check route
    first = json.loads(learned.stdout)[0]["id"]
    assert run_cli("learnings", "retire", first, "--store", pg_url).returncode == 0
    statuses = [
        r["status"] for r in json.loads(run_cli("learnings", "list", "--store", pg_url, "--json").stdout)
    ]
    assert sorted(statuses) == ["active", "retired"]


def test_the_schema_is_made_and_checked(pg_cluster: Cluster) -> None:
    url = pg_cluster.fresh_database("schema_check")
    unmade = run_cli("status", "--store", url)
    assert (
        unmade.returncode == 1 and "has no todoflow schema: create it with `todoflow db init" in unmade.stderr
    )
    migrated = run_cli("db", "migrate", "--store", url)
    assert migrated.returncode == 1 and "has no todoflow schema" in migrated.stderr
    made = run_cli("db", "init", "--store", url)
    assert made.returncode == 0 and "from version 0 to 1" in made.stdout
    again = run_cli("db", "init", "--store", url)
    assert again.returncode == 0 and "is at version 1" in again.stdout
    assert run_cli("db", "migrate", "--store", url).returncode == 0
    assert run_cli("status", "--store", url).stdout.startswith("no runs in postgresql://")


def test_store_options_are_checked(tmp_path: Path) -> None:
    both = run_cli("status", "--store", "postgresql://x@127.0.0.1:1/x", "--run-dir", str(tmp_path))
    assert both.returncode == 2 and "not both" in both.stderr
    wrong = run_cli("status", "--store", "mysql://x")
    assert wrong.returncode == 2 and "--store takes a postgresql:// URL" in wrong.stderr
    down = run_cli("status", "--store", "postgresql://nobody:secret@127.0.0.1:1/none")
    assert down.returncode == 1 and "cannot connect to postgresql://nobody@127.0.0.1:1/none" in down.stderr
    assert "secret" not in down.stderr


@pytest.mark.parametrize("store", ["folder", "postgres"])
def test_status_follow_prints_each_step_until_the_run_completes(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where: Path | str = tmp_path / "runs" if store == "folder" else request.getfixturevalue("pg_url")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    definition = from_source(FLOW, "flow.todoflow").or_raise()
    engine = process.start(definition, where, workspace=workspace, process_id="f-1")
    option = ["--run-dir", str(where)] if store == "folder" else ["--store", str(where)]
    follower = subprocess.Popen(
        [sys.executable, "-m", "todoflow", "status", "f-1", "--follow", *option],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert follower.stdout is not None
        engine.step(engine.directive().attempt_id, intake("a"))
        assert "submit_tasks" in follower.stdout.readline()
        engine.step(engine.directive().attempt_id, confirm(1))
        engine.step(engine.directive().attempt_id, confirm(2))
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    engine.close()
    assert follower.returncode == 0, err
    lines = out.splitlines()
    assert [line.split()[3] for line in lines[:2]] == ["confirm", "confirm"]
    assert lines[-1] == "complete: result {}"


def test_a_step_notifies_only_for_a_followed_run(tmp_path: Path, pg_url: str) -> None:
    """A followed run's step (one row, and two: a model call journaled with the reply) sends `<run> <seq>`
    on the journal's channel; an unfollowed run's sends nothing (a notifying commit would
    cost it its share of group commit). Notifications arrive in commit order, so the
    followed run's last one ends what is read: nothing from the other run came before it."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    definition = from_source(FLOW, "flow.todoflow").or_raise()
    followed = process.start(definition, pg_url, workspace=workspace, process_id="followed")
    other = process.start(definition, pg_url, workspace=workspace, process_id="other")
    follow = runs_at(pg_url).changes("followed", 0)
    next(follow)  # registered as the run's follower
    listener = psycopg.connect(pg_url, autocommit=True)
    listener.execute(f"LISTEN {pg_store.CHANNEL}")
    for engine in (other, followed):
        engine.step(engine.directive().attempt_id, intake("a", "b"))
        engine.step(
            engine.directive().attempt_id,
            confirm(1),
            usage=[Usage("orchestrator", Llm("openai", "m"), "default", 3, 4, 5)],
        )
    seen = []
    for note in listener.notifies(timeout=60):
        seen.append(note.payload)
        if note.payload == "followed 3":
            break
    listener.close()
    follow.close()
    followed.close()
    other.close()
    assert seen == ["followed 1", "followed 3"]


def test_a_program_holds_its_lease_while_its_presence_lives(pg_url: str) -> None:
    """The lease of a learn_code script: its runner's presence (host:pid) in the database."""
    runs = pg_store.PgRuns(pg_url)
    runs.presence()
    here = f"{socket.gethostname()}:{os.getpid()}"
    assert runs.alive(here) is True
    assert runs.alive(f"{socket.gethostname()}:{os.getpid() + 1}") is False
    assert runs.alive(f"another-machine:{os.getpid()}") is False
    runs.close()  # the presence connection goes, and the lease with it
    other = pg_store.PgRuns(pg_url)
    assert other.alive(here) is False
    other.close()


def test_following_a_run_while_the_database_is_down_is_a_database_error(
    pg_url: str, pg_cluster: Cluster
) -> None:
    runs = runs_at(pg_url)
    pg_cluster.crash()
    try:
        with pytest.raises(pg_store.DatabaseError, match="cannot follow the run in"):
            next(runs.changes("any", 0))
    finally:
        pg_cluster.restart()


def test_learn_code_reads_its_script_from_the_learnings_folder_with_the_store(
    tmp_path: Path, pg_url: str
) -> None:
    """`--learnings DIR` names where learn_code's main.py is, with `--store` as without it:
    the step completes by its script (no orchestrator reply), and `serve` takes it too."""
    scripts, workspace = tmp_path / "scripts", tmp_path / "workspace"
    shutil.copytree(ROOT / "examples" / "learnings", scripts)
    workspace.mkdir()
    example = ROOT / "examples" / "fast-path.todoflow"
    replies = ROOT / "examples" / "replies" / "fast-path.yaml"
    ran = run_cli(
        "run",
        str(example),
        "--agent",
        f"scripted:{replies}",
        "--store",
        pg_url,
        "--workspace",
        str(workspace),
        "--learnings",
        str(scripts),
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "the step completed by the fast path, with no orchestrator model" in ran.stdout
    served = run_cli(
        "serve", str(ROOT / "examples"), "--store", pg_url, "--learnings", str(scripts), stdin=""
    )
    assert served.returncode == 0 and not served.stderr, served.stderr
