"""`todoflow run` and `todoflow status` as a user runs them, and what users and attack runs
tripped over in them (each of those tests failed before its fix)."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from todoflow.compiler.formats import schema
from todoflow.runtime.agents.human import HumanAgent

from ..conftest import ROOT, run_cli
from ..support.runtime_helpers import intake, read_journal, start, walk

EXAMPLE = ROOT / "examples" / "release.todoflow"
REPLIES = ROOT / "examples" / "replies" / "release.yaml"


def _runs(folder: Path) -> list[Path]:
    return sorted((folder / ".todoflow" / "runs").iterdir())


def test_scripted_run_of_the_release_example_completes(tmp_path: Path) -> None:
    result = run_cli("run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note[N0301]: task `tag` moved after `notes`" in result.stderr  # the reorder, before work starts
    assert "[ship] Checklist 2/4 -> Prepare 3/4 -> Revise checklist" in result.stdout
    assert "Task 5/5: Announce on the mailing list" in result.stdout
    assert "-> complete: result {}" in result.stdout
    (run,) = _runs(tmp_path)
    names = {json.loads(line)["event"] for line in (run / "events.jsonl").read_text().splitlines()}
    assert {
        "TodoTaskItemCreated",
        "TodoTaskItemUpdated",
        "TodoTaskItemCompleted",
        "TodoTaskStepCompleted",
    } <= names
    todos = json.loads((run / "todos" / "ship.json").read_text())
    jsonschema.validate(todos, json.loads(schema("todos")))
    assert todos["summary"] == {"total": 5, "completed": 5, "in_progress": 0, "open": 0}
    assert [t["result"] for t in todos["todos"]][:2] == ["wheel and sdist built", "release notes written"]
    assert (tmp_path / "final_status.json").exists()


def test_blocked_stops_without_confirming_and_resume_continues(tmp_path: Path) -> None:
    (tmp_path / "branch.json").write_text("{}")
    typed = "made the branch\nbranch created\nblocked waiting for the build machine\n"
    first = run_cli("run", str(EXAMPLE), "--agent", "human", stdin=typed, cwd=tmp_path)
    assert first.returncode == 3
    assert "blocked: waiting for the build machine" in first.stdout
    (run,) = _runs(tmp_path)
    assert f"resume with: todoflow run --resume {run.name}" in first.stderr
    # the block is journaled (the todo is marked blocked); nothing is confirmed
    assert [entry["type"] for entry in read_journal(run)] == ["confirm", "submit_tasks", "update_todo"]
    status = run_cli("status", run.name, cwd=tmp_path)
    assert "[Work]      Task 1/4: Build wheels and sdist" in status.stdout
    more = "wheel built\nbuilt\nquit\n"
    second = run_cli("run", "--resume", run.name, "--agent", "human", stdin=more, cwd=tmp_path)
    assert second.returncode == 3
    assert "Task 2/4: Write release notes" in second.stdout
    assert len(read_journal(run)) == 4


def test_human_revises_the_checklist_line_by_line(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n        description "Tidy up."\n    }\n}\n')
    typed = "\n".join(
        [
            "sweep => floor clean",
            "mop => floor shiny",
            "",
            "two chores",
            "swept",
            "swept the floor",
            "revise",
            "sweep => floor clean",
            "dust => shelves clean",
            "mop => floor shiny",
            "",
            "2",
            "three chores now",
            "sweep stays done",
            "quit",
        ]
    )
    result = run_cli("run", str(flow), "--agent", "human", stdin=typed + "\n", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Task 2/3: dust" in result.stdout
    (run,) = _runs(tmp_path)
    card = json.loads(run_cli("status", run.name, "--json", cwd=tmp_path).stdout)
    assert card["checklist"]["results"] == ["swept the floor", "Pending", "Pending"]
    assert card["work"]["role"] == "Task 2/3"


def test_a_refused_scripted_reply_stops_the_run_resumably(tmp_path: Path) -> None:
    replies = tmp_path / "replies.yaml"
    replies.write_text("- tasks: [{action: a, expected_result: b}]\n  progress_checklist_outcome: one\n")
    result = run_cli("run", str(EXAMPLE), "--agent", f"scripted:{replies}", cwd=tmp_path)
    assert result.returncode == 1
    assert "refused: `tasks`, `progress_checklist_outcome` is not part of a reply at work" in result.stdout
    (run,) = _runs(tmp_path)
    assert read_journal(run) == []


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            "- evidence: '" + "x" * 612 + "'\n  progress_execution_outcome: done\n",
            "evidence is 612 characters",
        ),
        (
            "- taskz: [{action: a, expected_result: b}]\n  progress_checklist_outcome: one\n",
            "`taskz`, `progress_checklist_outcome` is no reply todoflow takes; a reply is one of: "
            "`tasks` + `progress_checklist_outcome` (intake); `evidence` + `progress_execution_outcome`",
        ),
        ("- get_todo: {todo_id: seven}\n", "todo_id is `seven`; a todo id is `todo_<N>` for task N"),
        ("- {blocked: waiting, evidence: x}\n", "`blocked: REASON` stands alone"),
    ],
)
def test_a_replies_file_is_checked_before_a_run_is_made(tmp_path: Path, reply: str, reason: str) -> None:
    """Issue 26: a typo in the first reply used to leave a `stopped` run behind."""
    replies = tmp_path / "replies.yaml"
    replies.write_text(reply)
    result = run_cli("run", str(EXAMPLE), "--agent", f"scripted:{replies}", cwd=tmp_path)
    assert result.returncode == 1 and f"{replies}: reply 1: " in result.stderr
    assert reason in result.stderr, result.stderr
    assert not (tmp_path / ".todoflow").exists()


def test_scripted_replies_read_the_todos_and_expect_what_they_hold(tmp_path: Path) -> None:
    """Issue 26: `list_todos` and `get_todo`, documented as replies, are accepted; a read
    is answered from the run and journals nothing; `expect` makes the script fail loudly."""
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n    }\n}\n')
    replies = tmp_path / "replies.yaml"
    script = (
        "- tasks: [{action: a, expected_result: a done}, {action: b, expected_result: b done}]\n"
        "  progress_checklist_outcome: two\n"
        "- list_todos: {}\n"
        '  expect: \'"status": "in_progress"\'\n'
        "- {evidence: did a, progress_execution_outcome: a ok}\n"
        "- get_todo: {todo_id: todo_1}\n"
        "  expect: 'a ok'\n"
        "- {evidence: did b, progress_execution_outcome: b ok}\n"
    )
    replies.write_text(script)
    result = run_cli("run", str(flow), "--agent", f"scripted:{replies}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = _runs(tmp_path)
    assert [e["type"] for e in read_journal(run)] == ["submit_tasks", "confirm", "confirm"]
    replies.write_text(script.replace("expect: 'a ok'", "expect: 'c ok'"))
    drifted = run_cli("run", str(flow), "--agent", f"scripted:{replies}", cwd=tmp_path)
    assert drifted.returncode == 1 and "the script's get_todo expected 'c ok' in its answer" in drifted.stderr


def test_resume_refuses_a_changed_definition_unless_accepted(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    first = run_cli("run", str(flow), "--agent", "human", stdin="", cwd=tmp_path)
    assert first.returncode == 3
    (run,) = _runs(tmp_path)
    flow.write_text('workflow w "W" {\n    regular a "A, changed" {\n    }\n}\n')
    refused = run_cli("run", "--resume", run.name, "--agent", "human", stdin="", cwd=tmp_path)
    assert refused.returncode == 1
    assert "changed since run" in refused.stderr and "--accept-changed-definition" in refused.stderr
    accepted = run_cli(
        "run",
        "--resume",
        run.name,
        "--accept-changed-definition",
        "--agent",
        "human",
        stdin="done\nok\n",
        cwd=tmp_path,
    )
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


def test_tasks_file_gives_the_ready_checklist_in_dependency_order(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n    }\n}\n')
    ready = [
        {"label": "deploy", "action": "Deploy", "expected_result": "live", "after": ["test"]},
        {"label": "test", "action": "Test", "expected_result": "green", "constraints": ["no flaky retries"]},
    ]
    (tmp_path / "tasks.json").write_text(json.dumps(ready))
    result = run_cli(
        "run", str(flow), "--tasks", "tasks.json", "--agent", "human", stdin="quit\n", cwd=tmp_path
    )
    assert "note: step `t`: task `deploy` moved after task `test`: it needs task `test`" in result.stderr
    assert "Task 1/2: Test" in result.stdout and "constraint: no flaky retries" in result.stdout


def test_tasks_file_with_a_cycle_is_refused_naming_the_pair(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n    }\n}\n')
    ready = [
        {"label": "a", "action": "A", "expected_result": "a", "after": ["b"]},
        {"label": "b", "action": "B", "expected_result": "b", "after": ["a"]},
    ]
    (tmp_path / "tasks.json").write_text(json.dumps(ready))
    result = run_cli("run", str(flow), "--tasks", "tasks.json", cwd=tmp_path)
    assert result.returncode == 1
    assert "task `a` and task `b` need each other's result" in result.stderr


def test_a_template_error_at_run_time_names_the_template_and_line(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text(
        'workflow w "W" {\n    regular a "A" {\n        prompt work """\n            Do it.\n'
        '            {{ step.routes[3].name }}\n            """\n    }\n}\n'
    )
    result = run_cli("run", str(flow), "--agent", "human", "--show-prompts", stdin="", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        "todoflow: error: the `work` prompt of step `a` (prompts/a/work.j2, line 2) failed" in result.stderr
    )
    assert "Traceback" not in result.stderr
    (run,) = _runs(tmp_path)
    assert run_cli("status", run.name, "--json", cwd=tmp_path).returncode == 0  # the run itself is intact


def test_show_prompts_prints_what_an_agent_reads(tmp_path: Path) -> None:
    result = run_cli("run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}", "--show-prompts", cwd=tmp_path)
    assert result.returncode == 0
    # an orchestrator turn: the step's orchestrator_system, orchestrator_user and work templates
    shown = result.stdout.split("--- prompt (work, step ship) ---\n", 1)[1]
    assert shown.startswith("You are the orchestrator of step `ship`")
    assert "Task 1/4 of step `ship`: Build wheels and sdist" in shown.split("--- prompt", 1)[0]
    assert "Constraint: Never push to main directly" in result.stdout


def test_status_lists_runs_and_exports_the_card_as_svg(tmp_path: Path) -> None:
    run_cli("run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}", cwd=tmp_path)
    (run,) = _runs(tmp_path)
    listing = run_cli("status", cwd=tmp_path)
    assert listing.stdout.startswith(f"{run.name}  complete")
    rows = json.loads(run_cli("status", "--json", cwd=tmp_path).stdout)
    assert rows == [
        {"process_id": run.name, "workflow": "release", "status": "complete", "where": "result {}"}
    ]
    svg = run_cli("status", run.name, "--svg", "card.svg", cwd=tmp_path)
    assert svg.returncode == 0
    text = (tmp_path / "card.svg").read_text()
    assert text.startswith("<svg") and ">Checklist<" in text and ">Prepare<" in text and ">Work<" in text
    missing = run_cli("status", "nope", cwd=tmp_path)
    assert missing.returncode == 1 and "no run `nope`" in missing.stderr


def test_run_usage_errors(tmp_path: Path) -> None:
    assert run_cli("run", cwd=tmp_path).returncode == 2
    unknown = run_cli("run", str(EXAMPLE), "--agent", "robot", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown agent `robot`" in unknown.stderr


def test_human_revises_the_checklist_in_the_editor(tmp_path: Path) -> None:
    """At a terminal with $EDITOR set, the checklist opens in the editor (here a script
    that adds a task); the rest is typed. A pseudo-terminal stands in for the person."""
    edit = tmp_path / "edit.py"
    edit.write_text(
        "import sys, pathlib\n"
        "path = pathlib.Path(sys.argv[1])\n"
        "lines = path.read_text().splitlines()\n"
        "assert lines[0].startswith('#') and lines[1:] == ['a => a is done', 'b => b is done'], lines\n"
        "path.write_text('\\n'.join([*lines, 'c => c is done']) + '\\n')\n"
    )
    engine, _ = start(tmp_path, 'workflow w "W" {\n    todo_task t "T" {\n    }\n}\n')
    *_, directive = walk(engine, [intake("a", "b"), {"teleportTo": "teleport-revise-tasks"}])
    assert directive.node == "revise"
    person, terminal = os.openpty()
    with os.fdopen(terminal, "r") as keyboard:
        os.write(person, b"1\nthree tasks\nnothing done yet\n")
        agent = HumanAgent(keyboard, io.StringIO(), editor=f"{sys.executable} {edit}")
        answer = agent.reply(directive)
    os.close(person)
    assert answer == {
        "tasks": [
            {"action": "a", "expected_result": "a is done"},
            {"action": "b", "expected_result": "b is done"},
            {"action": "c", "expected_result": "c is done"},
        ],
        "resume_from_task": 1,
        "progress_checklist_outcome": "three tasks",
        "progress_execution_outcome": "nothing done yet",
    }
    assert engine.step(directive.attempt_id, answer).role == "Task 1/3"


def test_the_human_agents_piped_example_in_the_docs_runs(tmp_path: Path) -> None:
    """docs/runtime.md shows a whole piped run of the human agent; it must work as shown."""
    docs = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    command = next(block for block in re.findall(r"```sh\n(.*?)```", docs, re.S) if "--agent human" in block)
    (tmp_path / "chores.todoflow").write_text(
        'workflow chores "Chores" {\n    todo_task tidy "Tidy" {\n        description "Tidy up."\n    }\n}\n'
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-> complete: result {}" in result.stdout
    assert result.stdout.count("refused") == 0


ORCHESTRATED = ROOT / "examples" / "orchestrated.todoflow"


def test_the_human_agent_delegates_and_plays_the_sub_agent(tmp_path: Path) -> None:
    typed = "\n".join(
        [
            "delegate build",
            "Build the site into site/.",
            "site/index.html exists",
            "failed the docs/ folder is empty",  # the sub-agent gives the todo back
            "quit",
        ]
    )
    args = ["--workspace", str(tmp_path), "--learnings", str(tmp_path / "learnings")]
    result = run_cli("run", str(ORCHESTRATED), "--agent", "human", *args, stdin=typed + "\n", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "`delegate build` (Build the site: To build the static site from docs/)" in result.stdout
    assert (
        "Sub-agent build · Task 1/3" in result.stdout
        and "Instructions: Build the site into site/." in result.stdout
    )
    assert "build gave todo_1 back: the docs/ folder is empty" in result.stdout
    (run,) = _runs(tmp_path)
    assert [e["type"] for e in read_journal(run)] == ["submit_tasks", "delegate", "sub_agent_failed"]


def test_a_run_stopped_at_its_bound_on_turns_resumes_with_a_raised_bound(tmp_path: Path) -> None:
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n        max_turns 1\n    }\n}\n')
    replies = tmp_path / "replies.yaml"
    replies.write_text(
        "- tasks: [{action: a, expected_result: a done}, {action: b, expected_result: b done}]\n"
        "  progress_checklist_outcome: two\n"
        "- {evidence: did a, progress_execution_outcome: a ok}\n"
        "- {evidence: did b, progress_execution_outcome: b ok}\n"
    )
    first = run_cli("run", str(flow), "--agent", f"scripted:{replies}", cwd=tmp_path)
    assert first.returncode == 3 and "has used all 1 of its orchestrator turns" in first.stdout
    (run,) = _runs(tmp_path)
    listing = run_cli("status", "--json", cwd=tmp_path)
    assert json.loads(listing.stdout)[0]["status"] == "blocked"
    assert f"`todoflow run --resume {run.name} --max-turns 2`" in first.stdout  # the real id (issue 26)
    hint = next(line for line in first.stderr.splitlines() if line.startswith("resume with: "))
    assert hint.endswith("--max-turns 2")
    resumed = run_cli(*shlex.split(hint.removeprefix("resume with: todoflow ")), cwd=tmp_path)  # as pasted
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [e["type"] for e in read_journal(run)][-2:] == ["raise_turns", "confirm"]


def test_a_fresh_run_honours_and_records_max_turns(tmp_path: Path) -> None:
    """Issue 26: `--max-turns` on a fresh run overrides the steps' bound; a resume keeps it."""
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n        max_turns 1\n    }\n}\n')
    replies = tmp_path / "replies.yaml"
    replies.write_text(
        "- tasks: [{action: a, expected_result: a done}, {action: b, expected_result: b done}, "
        "{action: c, expected_result: c done}]\n"
        "  progress_checklist_outcome: three\n"
        "- {evidence: did a, progress_execution_outcome: a ok}\n"
        "- {evidence: did b, progress_execution_outcome: b ok}\n"
        "- {evidence: did c, progress_execution_outcome: c ok}\n"
    )
    first = run_cli("run", str(flow), "--agent", f"scripted:{replies}", "--max-turns", "2", cwd=tmp_path)
    assert first.returncode == 3 and "has used all 2 of its orchestrator turns" in first.stdout
    assert "note: each todo_task step may take 2 orchestrator turns" in first.stderr
    (run,) = _runs(tmp_path)
    assert json.loads((run / "run.json").read_text())["max_turns"] == 2
    hint = next(line for line in first.stderr.splitlines() if line.startswith("resume with: "))
    assert hint.endswith("--max-turns 4")
    resumed = run_cli(*shlex.split(hint.removeprefix("resume with: todoflow ")), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    zero = run_cli("run", str(flow), "--max-turns", "0", cwd=tmp_path)
    assert zero.returncode == 2 and "a whole number of at least 1, not '0'" in zero.stderr


def test_learnings_are_listed_shown_and_retired(tmp_path: Path) -> None:
    replies = ROOT / "examples" / "replies" / "orchestrated.yaml"
    folder = ["--learnings", str(tmp_path / "l")]
    assert (
        run_cli("run", str(ORCHESTRATED), "--agent", f"scripted:{replies}", *folder, cwd=tmp_path).returncode
        == 0
    )
    listed = json.loads(run_cli("learnings", "list", *folder, "--json", cwd=tmp_path).stdout)
    first = listed[0]["id"]
    shown = json.loads(run_cli("learnings", "show", first, *folder, cwd=tmp_path).stdout)
    assert shown["sub_step_id"] == "site-builder" and shown["files"][0]["path"] == "site/index.html"
    retired = run_cli("learnings", "retire", first, *folder, cwd=tmp_path)
    assert retired.returncode == 0 and json.loads(retired.stdout)["status"] == "retired"
    # issue 26: the record keeps when it was learned, and says when it was retired
    assert json.loads(retired.stdout)["at"] == listed[0]["at"] and "retired_at" not in listed[0]
    assert json.loads(retired.stdout)["retired_at"] > listed[0]["at"]
    again = json.loads(
        run_cli("learnings", "list", *folder, "--step", "site-builder", "--json", cwd=tmp_path).stdout
    )
    assert [r["status"] for r in again] == ["retired"]
    missing = run_cli("learnings", "show", "nope:1", *folder, cwd=tmp_path)
    assert missing.returncode == 1 and "no learning `nope:1`" in missing.stderr


# -- what users and attack runs tripped over --------------------------------------------

FLOW = 'workflow w "W" {\n    todo_task t "T" {\n        description "Tidy up."\n    }\n}\n'


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


def test_a_person_has_the_todo_tools_at_the_work_prompt(tmp_path: Path) -> None:
    """Issue 26: `create`, `update`, `list` and `show` at an orchestrated step's prompt,
    refused by the engine's rules like any agent's call; a read journals nothing."""
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    todo_task t "T" {\n    }\n}\n')
    typed = [
        *("a => a done", "", "one"),
        *("list", "show todo_1", "create Tag it :: git tag v2 exists"),
        *("update todo_2 blocked waiting for review", "update todo_9 in_progress", "show todo_9", "list"),
        *("did a", "ok", "quit"),
    ]
    result = run_cli("run", str(flow), "--agent", "human", stdin="\n".join(typed) + "\n", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    out = result.stdout
    assert "`create <title> :: <description>`, `update <todo> <status> [notes]`, `list`, `show <todo>`" in out
    assert "todo_1 [in_progress] a => a done" in out
    assert "refused: there is no `todo_9`: the checklist holds todo_1 to todo_2" in out
    assert "there is no `todo_9` in step `t`" in out
    assert "todo_2 [blocked] Tag it => git tag v2 exists (waiting for review)" in out
    (run,) = _runs(tmp_path)
    assert [e["type"] for e in read_journal(run)] == ["submit_tasks", "create_todo", "update_todo", "confirm"]


def test_resume_refuses_a_run_another_program_drives_unless_forced(tmp_path: Path) -> None:
    """Issue 26: a second driver started silently; now it is told who drives the run."""
    import socket

    from todoflow.runtime.store.base import runs_at

    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    assert run_cli("run", str(flow), "--agent", "human", stdin="", cwd=tmp_path).returncode == 3
    (run,) = _runs(tmp_path)
    runs = runs_at(tmp_path / ".todoflow" / "runs")
    with runs.driving(run.name):  # this test's process drives it now
        assert runs.driver(run.name) == f"pid {os.getpid()} on {socket.gethostname()}"
        second = run_cli("run", "--resume", run.name, "--agent", "human", stdin="", cwd=tmp_path)
        assert second.returncode == 1
        assert f"run {run.name} is driven by pid {os.getpid()} on {socket.gethostname()}" in second.stderr
        assert "--force" in second.stderr and "started" not in second.stderr
        forced = run_cli("run", "--resume", run.name, "--agent", "human", "--force", stdin="", cwd=tmp_path)
        assert forced.returncode == 3, forced.stderr
    assert runs.driver(run.name) is None


def test_runs_are_removed_by_name_or_age_never_while_driven(tmp_path: Path) -> None:
    """Issue 26: `runs rm` and `runs prune`, a dry run unless --yes."""
    from todoflow.runtime.store.base import runs_at

    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    assert run_cli("run", str(flow), "--agent", "human", stdin="", cwd=tmp_path).returncode == 3
    assert run_cli("run", str(flow), "--agent", "human", stdin="did it\nok\n", cwd=tmp_path).returncode == 0
    states = {
        r.name: json.loads(run_cli("status", r.name, "--json", cwd=tmp_path).stdout) for r in _runs(tmp_path)
    }
    stopped, complete = sorted(_runs(tmp_path), key=lambda r: states[r.name]["status"] == "complete")
    meta = json.loads((stopped / "run.json").read_text())
    (stopped / "run.json").write_text(json.dumps(meta | {"started_at": "2020-01-01T00:00:00.000Z"}))

    dry = run_cli("runs", "prune", "--older-than", "30d", cwd=tmp_path)
    assert dry.returncode == 0 and dry.stdout == f"would remove {stopped.name}  stopped\n"
    assert "a dry run: pass --yes" in dry.stderr and stopped.exists()
    runs = runs_at(tmp_path / ".todoflow" / "runs")
    with runs.driving(stopped.name):
        kept = run_cli("runs", "rm", stopped.name, "--yes", cwd=tmp_path)
        assert (
            kept.returncode == 1 and f"kept {stopped.name}: it is driven by pid {os.getpid()}" in kept.stderr
        )
    assert stopped.exists()
    assert (
        run_cli("runs", "prune", "--older-than", "30d", "--state", "complete", "--yes", cwd=tmp_path).stdout
        == ""
    )
    pruned = run_cli("runs", "prune", "--older-than", "30d", "--state", "stopped", "--yes", cwd=tmp_path)
    assert pruned.stdout == f"removed {stopped.name}  stopped\n" and not stopped.exists()
    removed = run_cli("runs", "rm", complete.name, "--yes", cwd=tmp_path)
    assert removed.stdout == f"removed {complete.name}  complete\n" and _runs(tmp_path) == []
    unknown = run_cli("runs", "rm", "nope", cwd=tmp_path)
    assert unknown.returncode == 1 and "no run nope in" in unknown.stderr
    assert run_cli("runs", "prune", "--older-than", "soon", cwd=tmp_path).returncode == 2


def test_a_failed_prevalidation_says_so_and_quit_says_stopped_once(tmp_path: Path) -> None:
    """Issue 26, small things: the progress line names the prevalidation and the route."""
    replies = ROOT / "examples" / "replies" / "orchestrated.yaml"
    args = ["--workspace", str(tmp_path), "--learnings", str(tmp_path / "learnings")]
    result = run_cli("run", str(ORCHESTRATED), "--agent", f"scripted:{replies}", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "[publish] prevalidation failed for todo_1 (route build): `site/index.html` does not exist"
        in result.stdout
    )
    assert "gave todo_1 back" not in result.stdout
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    quit_ = run_cli("run", str(flow), "--agent", "human", stdin="quit\n", cwd=tmp_path)
    assert quit_.returncode == 3 and quit_.stdout.count("stopped") == 1, quit_.stdout


def test_json_output_has_one_spelling_and_keeps_its_alias(tmp_path: Path) -> None:
    """Issue 26 item 9: `--format json` on the run verbs, `--json` the same."""
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "W" {\n    regular a "A" {\n    }\n}\n')
    assert run_cli("run", str(flow), "--agent", "human", stdin="did it\nok\n", cwd=tmp_path).returncode == 0
    (run,) = _runs(tmp_path)
    for verb in (["status"], ["status", run.name], ["log", run.name], ["learnings", "list"]):
        spelled = run_cli(*verb, "--format", "json", cwd=tmp_path)
        assert spelled.returncode == 0, spelled.stderr
        assert json.loads(spelled.stdout) == json.loads(run_cli(*verb, "--json", cwd=tmp_path).stdout)
    assert run_cli("status", "--format", "text", cwd=tmp_path).stdout.startswith(run.name)


def test_a_compiled_plan_runs_under_its_workflow_title(tmp_path: Path) -> None:
    """Issue 26, small things: the manifest beside plan.json names the workflow."""
    flow = tmp_path / "flow.todoflow"
    flow.write_text('workflow w "Weekly chores" {\n    regular a "A" {\n    }\n}\n')
    assert run_cli("compile", str(flow), "-o", str(tmp_path / "out"), cwd=tmp_path).returncode == 0
    result = run_cli("run", str(tmp_path / "out" / "plan.json"), "--agent", "human", stdin="", cwd=tmp_path)
    assert result.returncode == 3 and result.stdout.startswith("Weekly chores — out-")
    (run,) = _runs(tmp_path)
    assert json.loads((run / "run.json").read_text())["title"] == "Weekly chores"
