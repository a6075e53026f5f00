"""`todoflow replay` and `diff --runs`: a run's journal through the engine with another
definition. Against the run's own definition every example run (complete, and stopped
halfway) is reproduced exactly — its state, its journal, its directive and the card
`status` shows; a changed task's wording names the first refused entry with the
engine's own refusal; a removed step, a lowered bound of turns and a tighter `expect`
give their verdicts; every kind of entry is made again; nothing is written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest
import yaml

from todoflow.runtime import process
from todoflow.runtime.definition import from_source, read_definition
from todoflow.runtime.engine import Refusal
from todoflow.runtime.entries import KINDS
from todoflow.runtime.llm_choice import ToolUse, Usage
from todoflow.runtime.plan import Llm, Task
from todoflow.runtime.state import attempt_id
from todoflow.runtime.store.base import runs_at
from todoflow.runtime.views.replay import asked_kinds, replay

from ...conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples"
REPLIES = sorted((EXAMPLES / "replies").glob("*.yaml"))
RELEASE = EXAMPLES / "release.todoflow"
ORCHESTRATED = EXAMPLES / "orchestrated.todoflow"


class ExampleRun(NamedTuple):
    example: Path
    process_id: str
    status: int  # `todoflow run`'s exit status: 0 complete, 3 stopped


class Runs(NamedTuple):
    root: Path  # the working folder: the workspace and the learnings are here
    run_dir: Path
    runs: dict[str, ExampleRun]  # `<example>` (complete) and `<example>-halfway`


def _start(root: Path, example: Path, replies: Path, run_dir: Path) -> ExampleRun:
    """A run of `example` with its workspace `root/<replies' name>`."""
    workspace = root / replies.stem
    workspace.mkdir()
    args = ["--run-dir", str(run_dir), "--workspace", str(workspace), "--learnings", str(root / "learnings")]
    ran = run_cli("run", str(example), "--agent", f"scripted:{replies}", *args, cwd=root)
    assert ran.returncode in (0, 3), ran.stdout + ran.stderr
    started = next(line for line in ran.stderr.splitlines() if line.startswith("started "))
    return ExampleRun(example, started.split()[1], ran.returncode)


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Each example with scripted replies, run to its end and run with half its replies
    (stopped halfway), in one folder of runs."""
    root = tmp_path_factory.mktemp("examples")
    shutil.copytree(EXAMPLES / "learnings", root / "learnings")
    run_dir = root / "runs"
    found = {}
    for replies in REPLIES:
        example = EXAMPLES / f"{replies.stem}.todoflow"
        found[replies.stem] = _start(root, example, replies, run_dir)
        script = yaml.safe_load(replies.read_text())
        half = root / f"{replies.stem}-halfway.yaml"
        half.write_text(yaml.safe_dump({"replies": script["replies"][: len(script["replies"]) // 2]}))
        found[f"{replies.stem}-halfway"] = _start(root, example, half, run_dir)
    assert {run.status for run in found.values()} == {0, 3}
    return Runs(root, run_dir, found)


NAMES = [p.stem for p in REPLIES] + [f"{p.stem}-halfway" for p in REPLIES]


@pytest.mark.parametrize("name", NAMES)
def test_a_replay_against_its_own_definition_reproduces_the_run(example_runs: Runs, name: str) -> None:
    run = example_runs.runs[name]
    replayed = replay(
        runs_at(example_runs.run_dir), run.process_id, read_definition(run.example).or_raise(), "x"
    )
    assert replayed.report.verdict == "compatible" and replayed.report.from_entry is None
    assert {entry.outcome for entry in replayed.report.entries} <= {"holds"}
    engine, store = process.open_process(example_runs.run_dir, run.process_id)
    with engine:
        directive = engine.directive()
        assert replayed.directive.state == directive.state  # to the timestamps
        assert replayed.store.entries() == store.entries()  # every entry made again, as it was
        assert len(replayed.report.entries) == len(store.entries())
        assert replayed.directive.to_json() == directive.to_json()  # the attempt id and prompt too
    assert replayed.report.stands.status == ("complete" if run.status == 0 else "stopped")


@pytest.mark.parametrize("name", NAMES)
def test_the_replay_shows_the_card_status_shows(example_runs: Runs, name: str) -> None:
    run = example_runs.runs[name]
    where = ["--run-dir", str(example_runs.run_dir)]
    replayed = run_cli("replay", run.process_id, "--against", str(run.example), *where)
    assert replayed.returncode == 0, replayed.stderr
    status = run_cli("status", run.process_id, *where)
    assert replayed.stdout.endswith(f"here{_attempt(replayed.stdout)}:\n\n{status.stdout}")
    assert "verdict: compatible\n" in replayed.stdout


def _attempt(text: str) -> str:
    line = next(line for line in text.splitlines() if line.startswith("under NEW the run would stand"))
    return line.removeprefix("under NEW the run would stand here").removesuffix(":")


def _release_21(folder: Path) -> Path:
    new = folder / "release-2.1.todoflow"
    new.write_text(RELEASE.read_text().replace('"git tag v2.0 exists"', '"git tag v2.1 exists"'))
    return new


def _json(*args: str, cwd: Path = ROOT) -> tuple[int, dict[str, Any]]:
    result = run_cli(*args, "--format", "json", cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


def test_a_changed_task_wording_names_the_first_refused_entry(example_runs: Runs, tmp_path: Path) -> None:
    run = example_runs.runs["release"]
    new = _release_21(tmp_path)
    status, report = _json(
        "replay", run.process_id, "--against", str(new), "--run-dir", str(example_runs.run_dir)
    )
    refusal = "tasks[2].expected_result differs from the ready checklist; pass its wording on unchanged"
    assert status == 1
    assert (report["verdict"], report["from_entry"]) == ("compatible with refusals", 2)
    assert report["first_refusal"] == {
        "seq": 2,
        "type": "submit_tasks",
        "step": "ship",
        "by": "caller",
        "outcome": "refused",
        "reason": refusal,
    }
    outcomes = [(e["seq"], e["outcome"], e.get("reason")) for e in report["entries"]]
    assert outcomes[0] == (1, "holds", None)
    assert outcomes[2:] == [
        (seq, "unreachable", "under NEW the run is at step `ship`, intake") for seq in range(3, 10)
    ]
    assert report["stands"] | {"attempt_id": None} == {
        "step": "ship",
        "node": "intake",
        "position": 1,
        "total": 0,
        "role": "Checklist",
        "status": "stopped",
        "completed_steps": ["prepare"],
        "attempt_id": None,
    }
    # word for word what NEW's engine says to the same intake at run time
    engine = process.start(read_definition(new).or_raise(), tmp_path / "runs", workspace=tmp_path)
    (tmp_path / "branch.json").write_text("{}")
    directive = engine.step(
        engine.directive().attempt_id, {"evidence": "e", "progress_execution_outcome": "o"}
    )
    sent = {
        "tasks": [
            {"action": t.action, "expected_result": t.expected_result}
            for t in read_definition(RELEASE).or_raise().plan.step("ship").ready_tasks or ()
        ],
        "progress_checklist_outcome": "4 ordered tasks from the ready checklist",
    }
    with pytest.raises(Refusal) as refused:
        engine.step(directive.attempt_id, sent, "caller")
    assert refused.value.reason == refusal


def test_the_text_groups_the_entries_and_gives_the_verdict(example_runs: Runs, tmp_path: Path) -> None:
    run = example_runs.runs["release"]
    new = _release_21(tmp_path)
    result = run_cli(
        "replay", run.process_id, "--against", str(new), "--run-dir", str(example_runs.run_dir), cwd=tmp_path
    )
    assert result.returncode == 1 and result.stderr == ""
    table = result.stdout.split("\n\n")[1]
    assert table == (
        "  1    prepare  holds                confirm\n"
        "  2    ship     refused              submit_tasks: tasks[2].expected_result differs from the ready "
        "checklist; pass its wording on unchanged\n"
        "  3-9  ship     no longer reachable  confirm ×5, teleport, revise: under NEW the run is at step "
        "`ship`, intake"
    )
    assert "\nverdict: compatible with refusals from entry 2\n" in result.stdout


def test_a_removed_step_makes_the_run_incompatible(example_runs: Runs, tmp_path: Path) -> None:
    run = example_runs.runs["release"]
    text = RELEASE.read_text()
    start, end = text.index("    regular prepare"), text.index("    todo_task ship")
    new = tmp_path / "no-prepare.todoflow"
    new.write_text(text[:start] + text[end:])
    _, report = _json("replay", run.process_id, "--against", str(new), "--run-dir", str(example_runs.run_dir))
    assert (report["verdict"], report["from_entry"], report.get("first_refusal")) == ("incompatible", 1, None)
    first, *rest = report["entries"]
    assert (first["outcome"], first["reason"]) == (
        "unreachable",
        "under NEW the run is at step `ship`, intake",
    )
    assert {entry["outcome"] for entry in rest} == {"holds"}  # the ship step's history is NEW's
    assert report["stands"]["status"] == "complete" and report["stands"]["completed_steps"] == ["ship"]


def test_a_lowered_bound_of_turns_refuses_the_turn_past_it(example_runs: Runs, tmp_path: Path) -> None:
    run = example_runs.runs["orchestrated"]
    new = tmp_path / "three-turns.todoflow"
    new.write_text(ORCHESTRATED.read_text().replace("max_turns 20", "max_turns 3"))
    _, report = _json("replay", run.process_id, "--against", str(new), "--run-dir", str(example_runs.run_dir))
    refused = report["first_refusal"]
    assert report["verdict"] == "compatible with refusals" and refused["type"] == "delegate"
    assert refused["reason"] == (
        "step `publish` has used all 3 of its orchestrator turns (execution_max_turns 3); "
        f"raise the bound to go on: `todoflow run --resume {run.process_id} --max-turns 6`"
    )
    assert report["stands"]["status"] == "blocked"


def test_files_the_run_never_checked_are_not_known_unless_the_workspace_is_asked(
    example_runs: Runs, tmp_path: Path
) -> None:
    run = example_runs.runs["release"]
    where = ["--run-dir", str(example_runs.run_dir)]
    new = tmp_path / "notes.todoflow"
    new.write_text(
        RELEASE.read_text().replace(
            'expect file "final_status.json"',
            'expect file "final_status.json"\n        expect file "NOTES.md"',
        )
    )
    _, report = _json("replay", run.process_id, "--against", str(new), *where)
    assert report["first_refusal"]["seq"] == 9 and report["first_refusal"]["reason"] == (
        "step `ship` cannot complete: its expected file `NOTES.md` is not known to be there: the run "
        "never checked it (--check-workspace looks)"
    )
    _, looked = _json("replay", run.process_id, "--against", str(new), *where, "--check-workspace")
    assert looked["check_workspace"] and looked["first_refusal"]["reason"] == (
        "step `ship` cannot complete: its expected file `NOTES.md` does not exist in the workspace"
    )
    # a file the journal vouches for (prepare completed with branch.json there) counts
    vouched = tmp_path / "branch.todoflow"
    vouched.write_text(
        RELEASE.read_text().replace('expect file "final_status.json"', 'expect file "branch.json"')
    )
    assert _json("replay", run.process_id, "--against", str(vouched), *where)[1]["verdict"] == "compatible"


def test_a_route_expecting_a_file_the_run_never_checked_fails_its_prevalidation(
    example_runs: Runs, tmp_path: Path
) -> None:
    run = example_runs.runs["orchestrated"]
    where = ["--run-dir", str(example_runs.run_dir)]
    new = tmp_path / "report.todoflow"
    new.write_text(
        ORCHESTRATED.read_text().replace(
            'expect file "links.json"', 'expect file "links.json"\n                expect file "report.html"'
        )
    )
    _, report = _json("replay", run.process_id, "--against", str(new), *where)
    refused = report["first_refusal"]
    assert (refused["type"], refused["step"], report["verdict"]) == (
        "sub_agent_done",
        "publish",
        "compatible with refusals",
    )
    assert refused["reason"] == (
        "prevalidation failed: `report.html` is not known to be there: the run never checked it "
        "(--check-workspace looks)"
    )
    assert report["stands"]["node"] == "work"  # the todo went back to the orchestrator, as it would
    workspace = example_runs.root / "orchestrated"
    (workspace / "report.html").write_text("<p>ok</p>")
    try:
        assert (
            _json("replay", run.process_id, "--against", str(new), *where, "--check-workspace")[1]["verdict"]
            == "compatible"
        )
    finally:
        (workspace / "report.html").unlink()


# -- every kind of entry ------------------------------------------------------------------

EVERY_KIND = """workflow every "Every kind of entry" {
    regular first "First" {
        description "Start."
    }
    todo_task fast "Fast" {
        mode learn_code
        route make "Make" when "To make the file" {
            regular maker "Maker" {
                expect file "made.txt"
            }
        }
    }
    todo_task work "Work" {
        max_turns 4
        route make "Make" when "To make the file" {
            regular maker2 "Maker" {
                expect file "made.txt"
            }
        }
    }
}
"""


def _every_kind(folder: Path) -> tuple[Path, str]:
    """A run whose journal holds every kind of entry, stepped through the engine."""
    definition = from_source(EVERY_KIND).or_raise()
    engine = process.start(definition, folder / "runs", workspace=folder)
    done = {"evidence": "done", "progress_execution_outcome": "done"}

    def step(reply: dict[str, Any], by: str = "agent", usage: tuple[Usage | ToolUse, ...] = ()) -> None:
        engine.step(engine.directive().attempt_id, reply, by, usage)

    def delegate(position: int, route: str | None) -> dict[str, Any]:
        agent = {"selected_route_id": route} if route else {"use_generic_agent": True}
        return {
            "next_action": "delegate",
            "todo_id_to_execute": f"todo_{position}",
            "instructions_to_sub_agent": "do it",
            **agent,
        }

    step(done)  # first
    step(
        {"tasks": [{"action": "make", "expected_result": "made"}], "progress_checklist_outcome": "1"},
        "caller",
    )
    attempt = engine.directive().attempt_id
    engine.journal(
        attempt,
        lambda seq, at: _entry("fast_path_started", seq, at, "fast", script_sha256="0" * 64, runner="here:1"),
    )
    step(delegate(1, "make"), "script")
    step({"failed": "no file"})
    attempt = engine.directive().attempt_id
    engine.journal(
        attempt, lambda seq, at: _entry("fast_path_failed", seq, at, "fast", reason="main.py exited with 1")
    )
    step({"tasks": [{"action": "make", "expected_result": "made"}], "progress_checklist_outcome": "1"})
    step(delegate(1, "make"))
    (folder / "made.txt").write_text("made")
    step({"complete_todo": {"todo_id": "todo_1", "result": "made", "evidence": "made.txt"}})  # fast done
    llm = Usage("orchestrator", Llm("openai", "gpt-4.1"), "default", 100, 20, 300)
    step(
        {
            "tasks": [
                {"action": "a", "expected_result": "a done"},
                {"action": "b", "expected_result": "b done"},
            ],
            "progress_checklist_outcome": "2",
        },
        usage=(llm,),
    )
    step({"next_action": "continue", "progress_summary": "reading"})
    step({"create_todo": {"title": "c", "description": "c done", "priority": "low"}})
    step({"update_todo": {"todo_id": "todo_2", "notes": "later"}})
    engine.record_usage(engine.directive().attempt_id, [llm])
    started = {"agent": "orchestrator", "todo": "todo_2", "command": "make", "runner": "h:1", "group": 1}
    engine.journal(
        engine.directive().attempt_id,
        lambda seq, at: _entry("command_started", seq, at, "work", **started, leader=None),
    )
    written = {"file": "made.txt", "sha256": "1" * 64}
    tool = ToolUse("orchestrator", "write_file", "todo_2", "2" * 64, 40, 30, 3, False, written)
    step({"update_todo": {"todo_id": "todo_2", "notes": "wrote"}}, usage=(tool,))
    engine.raise_turns(engine.directive().attempt_id, 40)
    step(delegate(1, None))
    step({"update_todo": {"todo_id": "todo_1", "status": "in_progress", "notes": "on it"}})
    step(done)
    (folder / "made.txt").unlink()
    step(delegate(2, "make"))
    step(done)  # prevalidation fails: back to the orchestrator
    step({"teleportTo": "teleport-revise-tasks"})
    step(
        {
            "tasks": [
                {"action": "a", "expected_result": "a done"},
                {"action": "b2", "expected_result": "b2 done"},
            ],
            "resume_from_task": 2,
            "progress_checklist_outcome": "b reworded",
            "progress_execution_outcome": "a stays done",
        }
    )
    step(done)
    engine.close()
    return folder / "runs", engine.process_id


def _entry(kind: str, seq: int, at: str, step: str, **fields: Any) -> Any:
    return KINDS[kind](seq, at, "driver", step, **fields)


def test_every_kind_of_entry_is_made_again(tmp_path: Path) -> None:
    run_dir, process_id = _every_kind(tmp_path)
    replayed = replay(runs_at(run_dir), process_id, from_source(EVERY_KIND).or_raise(), "x")
    engine, store = process.open_process(run_dir, process_id)
    with engine:
        kinds = {entry.TYPE for entry in store.entries()}
        assert kinds == set(KINDS)  # the journal holds every kind
        assert replayed.report.verdict == "compatible"
        assert replayed.store.entries() == store.entries()
        assert replayed.directive.state == engine.directive().state
    assert asked_kinds() == set(KINDS.values())  # each kind has its function


def test_a_fast_path_where_new_has_none_is_no_longer_reachable(tmp_path: Path) -> None:
    run_dir, process_id = _every_kind(tmp_path)
    new = from_source(EVERY_KIND.replace("        mode learn_code\n", "")).or_raise()
    report = replay(runs_at(run_dir), process_id, new, "x").report
    started = next(e for e in report.entries if e.type == "fast_path_started")
    assert (report.verdict, report.from_entry) == ("incompatible", started.seq)
    assert started.reason == "step `fast` is not a learn_code step under NEW: no fast path runs there"


CALLERS = """workflow callers "A caller's checklist and goal" {
    todo_task w "Work" {
        description "Do the work."
    }
    regular after "After" {
        description "Check it."
    }
}
"""


def test_a_callers_ready_checklist_and_goal_go_with_the_run(tmp_path: Path) -> None:
    ready = {"w": (Task("Write it", "it is written"), Task("Read it", "it is read"))}
    engine = process.start(
        from_source(CALLERS).or_raise(), tmp_path / "runs", workspace=tmp_path, ready=ready, goal="Ship 3.0"
    )
    with engine:
        directive = engine.directive()
        directive = engine.step(directive.attempt_id, directive.ready_reply() or {}, "caller")
        engine.step(directive.attempt_id, {"evidence": "written", "progress_execution_outcome": "done"})
        now = engine.directive()
    replayed = replay(runs_at(tmp_path / "runs"), engine.process_id, from_source(CALLERS).or_raise(), "x")
    assert replayed.report.verdict == "compatible"
    assert replayed.directive.to_json() == now.to_json() and "Ship 3.0" in now.prompt()
    # NEW without the step the checklist was given for: the checklist is left behind
    renamed = from_source(CALLERS.replace("todo_task w ", "todo_task w2 ")).or_raise()
    report = replay(runs_at(tmp_path / "runs"), engine.process_id, renamed, "x").report
    assert (report.verdict, report.from_entry) == ("incompatible", 1)
    assert report.stands.step == "w2" and report.stands.node == "intake"


# -- diff --runs ----------------------------------------------------------------------------


def test_diff_runs_gives_every_run_of_old_its_verdict(example_runs: Runs, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs"
    shutil.copytree(example_runs.run_dir, run_dir)
    damaged = example_runs.runs["release-halfway"].process_id
    (run_dir / damaged / "journal.jsonl").write_text("not an entry\n{}\n")
    new = _release_21(tmp_path)
    status, diff = _json("diff", str(RELEASE), str(new), "--runs", "--run-dir", str(run_dir))
    jsonschema.validate(diff, json.loads(run_cli("schema", "diff").stdout))
    assert status == 1
    runs = {run["process_id"]: run for run in diff["runs"]}
    assert set(runs) == {example_runs.runs["release"].process_id, damaged}  # release's runs only
    complete = runs[example_runs.runs["release"].process_id]
    assert (complete["status"], complete["verdict"], complete["from_entry"]) == (
        "complete",
        "compatible with refusals",
        2,
    )
    assert complete["first"] == complete["first_refusal"] and complete["first"]["type"] == "submit_tasks"
    assert runs[damaged]["status"] == "damaged" and "is damaged" in runs[damaged]["error"]
    text = run_cli("diff", str(RELEASE), str(new), "--runs", "--run-dir", str(run_dir)).stdout
    assert "\nruns of OLD: 2\n" in text
    assert (
        f"  {complete['process_id']}  complete  compatible with refusals from entry 2 (submit_tasks of step "
        "`ship` refused: tasks[2].expected_result differs from the ready checklist; pass its wording on "
        "unchanged)\n"
    ) in text


def test_diff_runs_of_a_workflow_against_itself(example_runs: Runs) -> None:
    result = run_cli(
        "diff", str(ORCHESTRATED), str(ORCHESTRATED), "--runs", "--run-dir", str(example_runs.run_dir)
    )
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "runs of OLD: 2" and all(line.endswith("compatible") for line in lines[1:])


# -- nothing written ---------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file and folder under `root`: its bytes and mtime (a folder: its mtime)."""
    found: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (path.read_bytes() if path.is_file() else b"", info.st_mtime_ns)
    found["."] = (b"", root.stat().st_mtime_ns)
    return found


def test_replay_and_diff_runs_write_nothing(example_runs: Runs, tmp_path: Path) -> None:
    root = example_runs.root
    new = _release_21(tmp_path)
    before = _tree(root)
    where = ["--run-dir", str(example_runs.run_dir)]
    for run in example_runs.runs.values():
        for extra in ([], ["--check-workspace"], ["--format", "json"]):
            result = run_cli("replay", run.process_id, "--against", str(new), *where, *extra, cwd=root)
            assert result.returncode in (0, 1) and "Traceback" not in result.stderr
    assert run_cli("diff", str(RELEASE), str(new), "--runs", *where, cwd=root).returncode == 1
    assert _tree(root) == before


# -- errors ---------------------------------------------------------------------------------


def test_bad_input_is_a_clear_error(example_runs: Runs, tmp_path: Path) -> None:
    where = ["--run-dir", str(example_runs.run_dir)]
    run = example_runs.runs["release"].process_id
    unknown = run_cli("replay", "nobody-1", "--against", str(RELEASE), *where)
    assert unknown.returncode == 1 and "no run `nobody-1` in" in unknown.stderr
    unreadable = run_cli("replay", run, "--against", str(tmp_path / "nothere.todoflow"), *where)
    assert unreadable.returncode == 2 and "nothere.todoflow" in unreadable.stderr
    broken = tmp_path / "broken.todoflow"
    broken.write_text('workflow w "W" {\n    regular a "A" {\n        next nowhere\n    }\n}\n')
    errors = run_cli("replay", run, "--against", str(broken), *where)
    assert errors.returncode == 2 and "broken.todoflow:3:" in errors.stderr
    both = run_cli("replay", run, "--against", str(RELEASE), *where, "--store", "postgresql://x/y")
    assert both.returncode == 2 and "not both" in both.stderr
    lone = run_cli("diff", str(RELEASE), str(RELEASE), *where)
    assert lone.returncode == 2 and "go with --runs" in lone.stderr
    missing = run_cli("replay", run)
    assert missing.returncode == 2 and "--against" in missing.stderr
    for result in (unknown, unreadable, errors, both, lone, missing):
        assert "Traceback" not in result.stderr and result.stdout == ""


def test_the_json_is_what_its_schema_says(example_runs: Runs, tmp_path: Path) -> None:
    schema = json.loads(run_cli("schema", "replay").stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    new = _release_21(tmp_path)
    for run in example_runs.runs.values():
        for against in (run.example, new):
            _, report = _json(
                "replay", run.process_id, "--against", str(against), "--run-dir", str(example_runs.run_dir)
            )
            jsonschema.validate(report, schema)


# -- PostgreSQL -------------------------------------------------------------------------------


def test_a_run_in_a_database_replays_too(tmp_path: Path, pg_url: str) -> None:
    replies = EXAMPLES / "replies" / "orchestrated.yaml"
    ran = run_cli(
        "run",
        str(ORCHESTRATED),
        "--agent",
        f"scripted:{replies}",
        "--store",
        pg_url,
        "--workspace",
        str(tmp_path),
    )
    assert ran.returncode == 0, ran.stderr
    process_id = next(line for line in ran.stderr.splitlines() if line.startswith("started ")).split()[1]
    status, report = _json("replay", process_id, "--against", str(ORCHESTRATED), "--store", pg_url)
    assert status == 0 and report["verdict"] == "compatible" and report["run"]["entries"] == 11
    listed = run_cli("diff", str(ORCHESTRATED), str(ORCHESTRATED), "--runs", "--store", pg_url)
    assert f"  {process_id}  complete  compatible\n" in listed.stdout


# -- the docs ---------------------------------------------------------------------------------

DOCUMENTED = "release-20261130-050233-dc0098"  # the run the docs show


def _documented(doc: str) -> list[str]:
    """The docs' console blocks of `replay` and `diff --runs`, unindented."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    fences = re.findall(r"^( *)```console\n(.*?)^\1```\n", text, re.S | re.M)
    blocks = [re.sub(f"^{indent}", "", body, flags=re.M) for indent, body in fences]
    return [
        b for b in blocks if b.startswith("$ todoflow replay") or "--runs\n" in b.partition("\n")[0] + "\n"
    ]


@pytest.mark.parametrize("doc", ["docs/runtime.md", "README.md"])
def test_the_docs_show_what_replay_prints(doc: str, tmp_path: Path) -> None:
    """The README's `release-2.1.todoflow` (the tag's expected result and `max_turns`
    changed) against the release example run to its end with its scripted replies."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    text = RELEASE.read_text().replace('"git tag v2.0 exists"', '"git tag v2.1 exists"')
    (tmp_path / "release-2.1.todoflow").write_text(
        text.replace("        max_turns 100\n", "        max_turns 120\n")
    )
    replies = "scripted:examples/replies/release.yaml"
    ran = run_cli("run", "examples/release.todoflow", "--agent", replies, cwd=tmp_path)
    process_id = next(line for line in ran.stderr.splitlines() if line.startswith("started ")).split()[1]
    blocks = _documented(doc)
    assert len(blocks) == {"docs/runtime.md": 2, "README.md": 1}[doc]  # replay, and diff --runs
    for block in blocks:
        line, _, shown = block.partition("\n")
        words = line.removeprefix("$ todoflow ").replace(DOCUMENTED, process_id).split()
        result = run_cli(*words, cwd=tmp_path)
        expected = shown.replace(DOCUMENTED, process_id)
        for seq in range(10):
            expected = expected.replace(attempt_id(DOCUMENTED, seq), attempt_id(process_id, seq))
        assert result.stdout == expected, line
