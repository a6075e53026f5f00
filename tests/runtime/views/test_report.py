"""The run report (`todoflow report`): its model from one orchestrated run, the log's
todos it is made of, its HTML pinned by a snapshot, and the command.

The run (`orchestrated`) goes through everything a report shows: a regular step, an
intake, a delegation whose prevalidation fails and one that passes (a learning), a turn
of the orchestrator's own, a sub-agent that gives up, a todo marked blocked, a
revision, the generic agent, the caller raising the bound on turns, a todo created and
confirmed by the orchestrator itself, and the run's completion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from todoflow.dsl.nodes import replace
from todoflow.runtime.views.log import log_json
from todoflow.runtime.views.report import Report, RunData, anchor, read_run, run_report
from todoflow.runtime.views.report_html import render

from ...conftest import EXAMPLES, FIXTURES, run_cli
from ...support.runtime_helpers import confirm, folder_digest, intake, start

FLOW = """\
workflow shipit "Ship it" {
    regular prepare "Prepare the branch" {
        description "Create release/2.0 from main."
        output "branch.json"
    }
    todo_task build "Build" {
        description "Build and document the thing."
        max_turns 8
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/."
                expect file "dist/app"
            }
        }
        route docs "Docs" when "To write the docs" {
            regular writer "Writer" {
                description "Write README.md."
            }
        }
        route deploy "Deploy" when "To deploy the build" {
            regular deployer "Deployer" {
                description "Deploy dist/app."
            }
        }
    }
}
"""


def delegate(todo: str, route: str | None, **more: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "next_action": "delegate",
        "todo_id_to_execute": todo,
        "instructions_to_sub_agent": f"Do {todo}; report what you did.",
        "success_criteria_for_sub_agent": f"{todo} is done and checked",
        "selection_reasoning": f"{route or 'the generic agent'} fits {todo}",
        "progress_summary": f"working on {todo}",
    }
    return reply | ({"selected_route_id": route} if route else {"use_generic_agent": True}) | more


def orchestrated(tmp: Path, source: str = FLOW, say: dict[str, str] | None = None) -> Path:
    """Run `source` through every kind of entry (see the module's docstring); the run folder.
    `say` replaces the replies' texts (action, evidence, reasoning, ...) to test escaping."""
    said = {"action": "release", "evidence": "make printed OK", "reasoning": "reading the sources"} | (
        say or {}
    )
    engine, store = start(tmp, source)
    workspace = tmp / "workspace"

    def step(reply: dict[str, Any]) -> None:
        engine.step(engine.directive().attempt_id, reply)

    try:
        step(confirm(0))  # prepare
        step(intake("compile it", "document it"))
        step(delegate("todo_1", "compile"))
        step(confirm(1))  # dist/app is missing: prevalidation fails
        step(delegate("todo_1", "compile"))
        (workspace / "dist").mkdir()
        (workspace / "dist" / "app").write_text("binary")
        step({"evidence": said["evidence"], "progress_execution_outcome": "built dist/app"})
        step({"next_action": "continue", "selection_reasoning": said["reasoning"]})
        step(delegate("todo_2", "docs"))
        step({"failed": "the docs tool is down"})
        step(
            {"update_todo": {"todo_id": "todo_2", "status": "blocked", "notes": "waiting for the docs tool"}}
        )
        step({"teleportTo": "teleport-revise-tasks"})
        revised = [
            {"action": "compile it", "expected_result": "compile it is done"},
            {"action": "write the docs", "expected_result": "README.md exists"},
            {"action": said["action"], "expected_result": "v2.0 is tagged"},
        ]
        step(
            {
                "tasks": revised,
                "resume_from_task": 2,
                "progress_checklist_outcome": "docs by hand, then release",
                "progress_execution_outcome": "compiled stays done",
            }
        )
        step(delegate("todo_2", None))
        step(confirm(2))
        engine.raise_turns(engine.directive().attempt_id, 12)
        step({"create_todo": {"title": "announce", "description": "the mail is sent", "priority": "high"}})
        step(confirm(3))
        step(confirm(4))
        assert engine.directive().completed
    finally:
        store.close()
    return tmp / "runs" / "p-1"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return orchestrated(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def report(run: Path) -> Report:
    return run_report(read_run(run.parent, run.name))


def stable(data: RunData) -> RunData:
    """The run's data with the paths of this machine replaced by fixed ones."""
    meta = data.meta.model_copy(
        update={"workspace": "/srv/shipit/workspace", "learnings": "/srv/shipit/workspace/learnings"}
    )
    return replace(data, meta=meta)


# -- anchors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("step", "build"), "step-build"),
        (("step", "build", "task", "3"), "step-build-task-3"),
        (("step", "a_b-c"), "step-a_b-c"),
        (("step", 'x" onmouseover="y'), "step-x.22..20.onmouseover.3d..22.y"),
        (("learning", "p-1:5"), "learning-p-1.3a.5"),
        (("step", "日本"), "step-.65e5..672c."),
    ],
)
def test_an_anchor_keeps_plain_names_and_spells_out_everything_else(
    parts: tuple[str, ...], expected: str
) -> None:
    assert anchor(*parts) == expected


def test_different_names_never_share_an_anchor() -> None:
    names = ["a.b", "a.2e.b", "a b", "a-b", "a_b", "a.20.b", "a~2"]
    assert len({anchor("step", n) for n in names}) == len(names)


def test_every_anchor_of_a_report_is_unique_and_the_ones_the_docs_promise(report: Report) -> None:
    steps = {s.step_id: s for s in report.steps}
    assert [s.anchor for s in report.steps] == ["step-prepare", "step-build"]
    build = steps["build"]
    assert [t.anchor for t in build.tasks] == [f"step-build-task-{n}" for n in range(1, 5)]
    assert [i.anchor for i in build.iterations] == [f"step-build-iteration-{n}" for n in range(12)]
    everything = [
        *(s.anchor for s in report.steps),
        *(t.anchor for s in report.steps for t in s.tasks),
        *(i.anchor for s in report.steps for i in s.iterations),
        *(item.anchor for item in report.learnings),
    ]
    assert len(everything) == len(set(everything))


def test_an_anchor_that_comes_twice_gets_a_suffix(tmp_path: Path) -> None:
    twins = """\
workflow twins "Twins" {
    regular a "A" {
        description "First."
    }
    regular a-task-1 "Reads like the task of a" {
        description "Second."
    }
}
"""
    engine, store = start(tmp_path, twins)
    engine.step(engine.directive().attempt_id, confirm(1))
    engine.step(engine.directive().attempt_id, confirm(2))
    store.close()
    first, second = run_report(read_run(tmp_path / "runs", "p-1")).steps
    assert (first.anchor, first.tasks[0].anchor) == ("step-a", "step-a-task-1")
    assert (second.anchor, second.tasks[0].anchor) == ("step-a-task-1~2", "step-a-task-1-task-1")


# -- the model -----------------------------------------------------------------------------


def test_each_task_says_its_status_result_evidence_who_and_when(report: Report) -> None:
    prepare, build = report.steps
    (only,) = prepare.tasks
    assert only.status == "completed" and only.confirmation is not None
    assert (only.confirmation.who.name, only.confirmation.evidence) == ("the step's agent", "evidence 0")
    rows = {t.todo_id: t for t in build.tasks}
    compiled = rows["todo_1"].confirmation
    assert compiled is not None and rows["todo_1"].result == "built dist/app"
    assert (compiled.who.kind, compiled.who.name) == ("route", "route compile (sub-agent compiler)")
    assert compiled.evidence == "make printed OK" and compiled.iteration == "step-build-iteration-2"
    generic = rows["todo_2"].confirmation
    assert generic is not None and generic.who.kind == "generic" and rows["todo_2"].action == "write the docs"
    by_hand = rows["todo_3"].confirmation
    assert by_hand is not None and (by_hand.who.kind, by_hand.evidence) == ("orchestrator", "evidence 3")
    assert rows["todo_4"].priority == "high" and rows["todo_4"].action == "announce"
    assert all(t.status == "completed" for t in build.tasks) and build.done == 4
    assert all(t.created_at <= t.updated_at for t in build.tasks)
    assert compiled.at == rows["todo_1"].updated_at


def test_the_iterations_carry_the_seeds_fields(report: Report) -> None:
    build = report.steps[1]
    failed, passed = build.iterations[1], build.iterations[2]
    assert (failed.action, failed.who and failed.who.kind, failed.result) == ("delegate", "route", "failed")
    fields = dict(passed.fields)
    assert fields["reasoning"] == "compile fits todo_1"
    assert fields["instructions"] == "Do todo_1; report what you did."
    assert fields["success criteria"] == "todo_1 is done and checked"
    assert fields["progress summary"] == "working on todo_1"
    assert fields["evidence"] == "make printed OK" and fields["outcome"] == "built dist/app"
    assert passed.todo is not None and passed.todo.anchor == "step-build-task-1"
    assert passed.validation is not None and passed.validation.passed
    assert passed.validation.files[0][0] == "dist/app" and len(passed.validation.files[0][1]) == 64
    assert passed.learning is not None and passed.learning.anchor == anchor("learning", "p-1:6")
    assert [len(i.entries) for i in build.iterations[:3]] == [1, 2, 2]  # a delegation and its answer
    intake_ = build.iterations[0]
    assert [t.action for t in intake_.submitted] == ["compile it", "document it"]


def test_a_todo_a_revision_replaced_is_named_but_not_linked(report: Report) -> None:
    failed_docs = report.steps[1].iterations[4]
    assert failed_docs.todo is not None and failed_docs.todo.title == "document it"
    assert failed_docs.todo.anchor is None  # todo_2 is "write the docs" now


def test_a_revision_shows_the_list_before_and_after(report: Report) -> None:
    revision = next(i.revision for i in report.steps[1].iterations if i.revision)
    assert [(t.action, t.change) for t in revision.before] == [("compile it", ""), ("document it", "removed")]
    assert [(t.action, t.change, t.was) for t in revision.after] == [
        ("compile it", "", 1),
        ("write the docs", "new", None),
        ("release", "new", None),
    ]
    assert revision.resume_from_task == 2


def test_problems_are_the_failed_validations_delegations_and_blocks(report: Report) -> None:
    assert [(p.kind, p.text, p.iteration) for p in report.problems] == [
        (
            "prevalidation failed",
            "prevalidation failed: `dist/app` does not exist in the workspace",
            "step-build-iteration-1",
        ),
        ("delegation failed", "the docs tool is down", "step-build-iteration-4"),
        ("todo blocked", "waiting for the docs tool", "step-build-iteration-5"),
    ]


def test_the_learnings_of_the_run_with_their_files(report: Report) -> None:
    (item,) = report.learnings
    assert item.record.id == "p-1:6" and item.record.route_id == "compile"
    assert item.file == "compiler/learnings.jsonl" and item.iteration == "step-build-iteration-2"
    assert report.missing_learnings == ()


def test_the_canvas_highlights_the_steps_and_sub_agents_the_run_went_through(report: Report) -> None:
    assert report.canvas is not None
    steps = {n.id: n.step_id for n in report.canvas.nodes}
    assert [steps[node_id] for node_id in report.visited] == ["prepare", "build", "compiler", "writer", None]
    assert "deployer" in steps.values()  # drawn, not visited


def test_the_caller_and_the_todo_tools_are_in_their_iterations(report: Report) -> None:
    fields = [dict(i.fields) for i in report.steps[1].iterations]
    assert {"update by orchestrator": "status blocked; notes: waiting for the docs tool"} in fields
    caller = next(f for f in fields if "caller" in f)
    assert caller["caller"] == "raised the bound on orchestrator turns to 12"
    assert next(f for f in fields if "created todo" in f)["created todo"] == "announce"


def test_a_learning_the_folder_lost_is_named(tmp_path: Path) -> None:
    folder = orchestrated(tmp_path)
    shutil.rmtree(tmp_path / "workspace" / "learnings")
    report = run_report(read_run(folder.parent, folder.name))
    assert report.learnings == () and report.missing_learnings == ("p-1:6",)
    assert next(i for s in report.steps for i in s.iterations if i.learning).learning.anchor is None  # type: ignore[union-attr]
    assert "The journal proves learnings the folder does not hold: p-1:6." in render(report)


def test_a_run_just_started_has_its_first_step_and_no_checklist(tmp_path: Path) -> None:
    start(tmp_path, FLOW)[1].close()
    report = run_report(read_run(tmp_path / "runs", "p-1"))
    assert (report.status, report.where, report.steps, report.problems) == (
        "stopped",
        "step prepare: Task 1/1",
        (),
        (),
    )
    assert report.canvas is not None
    assert [n.step_id for n in report.canvas.nodes if n.id in report.visited] == ["prepare"]


def test_a_plan_the_language_cannot_express_gets_a_sentence_instead_of_a_canvas(tmp_path: Path) -> None:
    start(tmp_path, FLOW)[1].close()
    stored = tmp_path / "runs" / "p-1" / "plan" / "plan.json"
    plan = json.loads(stored.read_text(encoding="utf-8"))
    plan["steps"][0]["id"] = "Prepare Step"  # a plan made elsewhere may use any id; the language may not
    stored.write_text(json.dumps(plan), encoding="utf-8")
    report = run_report(read_run(tmp_path / "runs", "p-1"))
    assert (report.canvas, report.visited) == (None, ())
    sentence = "The plan canvas cannot be drawn: its plan uses what the todoflow language cannot express."
    assert sentence in render(report)


def test_a_run_of_an_older_version_has_its_report(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "runs" / "v1-journal", tmp_path / "v1-journal")
    report = run_report(read_run(tmp_path, "v1-journal"))  # outcomes named as before entries were typed
    assert [(s.step_id, s.done, len(s.tasks)) for s in report.steps] == [
        ("prep", 1, 1),
        ("work", 3, 3),
        ("ship", 1, 2),
    ]
    assert [i.action for i in report.steps[1].iterations] == [
        "submit_tasks",
        "confirm",
        "teleport",
        "revise",
        "confirm",
        "confirm",
    ]
    build = report.steps[2].tasks[0]
    assert (build.result, build.confirmation and build.confirmation.evidence) == ("outcome 4", "evidence 4")
    assert report.canvas is not None and report.where == "step ship: Task 2/2"


def test_a_blocked_run_says_why(tmp_path: Path) -> None:
    engine, store = start(tmp_path, FLOW)
    engine.step(engine.directive().attempt_id, confirm(0))
    engine.step(engine.directive().attempt_id, intake("compile it"))
    for _ in range(8):
        engine.step(
            engine.directive().attempt_id, {"next_action": "continue", "selection_reasoning": "reading"}
        )
    store.close()
    report = run_report(read_run(tmp_path / "runs", "p-1"))
    assert report.status == "blocked"
    assert report.where.startswith("step build: step `build` has used all 8 of its orchestrator turns")


def test_each_task_shows_the_constraints_its_ready_checklist_gave_it(tmp_path: Path) -> None:
    """Issue 26, small things: the report's checklist shows each task's constraints."""
    replies = EXAMPLES[0].parent / "replies" / "release.yaml"
    release = EXAMPLES[0].parent / "release.todoflow"
    assert run_cli("run", str(release), "--agent", f"scripted:{replies}", cwd=tmp_path).returncode == 0
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    report = run_report(read_run(run.parent, run.name))
    ship = next(s for s in report.steps if s.step_id == "ship")
    rule = ("Never push to main directly",)
    assert [(t.action, t.constraints) for t in ship.tasks if t.constraints] == [
        ("Build wheels and sdist", rule),
        ("Tag the release", rule),
    ]
    page = render(report)
    assert (
        page.count('<span class="label">constraints</span><ul><li>Never push to main directly</li></ul>') == 2
    )


# -- the log's todos ----------------------------------------------------------------------


def test_the_log_gives_each_step_its_final_checklist_with_confirmations(run: Path) -> None:
    data = read_run(run.parent, run.name)
    todos = data.log["steps"][1]["todos"]
    assert [t["id"] for t in todos] == ["todo_1", "todo_2", "todo_3", "todo_4"]
    assert todos[0]["confirmation"] == {
        "seq": 6,
        "at": todos[0]["updated_at"],
        "iteration": 2,
        "agent": "compile",
        "evidence": "make printed OK",
    }
    assert todos[0]["assigned_agent"] == "compile" and todos[3]["priority"] == "high"
    assert set(todos[0]) >= {"title", "description", "status", "result", "created_at", "updated_at"}


def test_a_revision_drops_the_confirmations_past_the_prefix_it_keeps(tmp_path: Path) -> None:
    engine, store = start(tmp_path, FLOW)
    step = lambda reply: engine.step(engine.directive().attempt_id, reply)  # noqa: E731
    step(confirm(0))
    step(intake("one", "two", "three"))
    step(confirm(1))
    step(confirm(2))
    step({"teleportTo": "teleport-revise-tasks"})
    changed = [{"action": "one", "expected_result": "one is done"}, {"action": "TWO", "expected_result": "2"}]
    step(
        {
            "tasks": [*changed, {"action": "three", "expected_result": "three is done"}],
            "resume_from_task": 3,
            "progress_checklist_outcome": "two renamed",
            "progress_execution_outcome": "one stays done",
        }
    )
    log = log_json(engine.plan, engine.process_id, store.started_at, store.entries())
    store.close()
    todos = log["steps"][1]["todos"]
    assert [t["status"] for t in todos] == ["completed", "completed", "in_progress"]
    assert todos[0]["confirmation"]["evidence"] == "evidence 1"
    assert todos[1]["confirmation"] is None  # counted done by the revision; nobody confirmed TWO
    assert todos[1]["result"] == "Pending"


# -- the page ------------------------------------------------------------------------------


class HtmlSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "html"


def test_the_report_of_one_run(run: Path, snapshot: SnapshotAssertion) -> None:
    page = render(run_report(stable(read_run(run.parent, run.name))))
    assert page == snapshot.use_extension(HtmlSnapshot)


def test_the_same_run_gives_the_same_bytes_and_reading_it_writes_nothing(run: Path) -> None:
    before = folder_digest(run)
    first = render(run_report(read_run(run.parent, run.name)))
    again = render(run_report(read_run(run.parent, run.name)))
    assert first == again and folder_digest(run) == before


def test_the_page_loads_nothing_and_has_no_script(report: Report) -> None:
    page = render(report)
    policy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
    assert f'<meta http-equiv="Content-Security-Policy" content="{policy}">' in page
    assert "<script" not in page and "src=" not in page and "@import" not in page and "url(http" not in page
    assert page.count("<details") == sum(len(i.entries) for s in report.steps for i in s.iterations)


# -- the command ---------------------------------------------------------------------------


def test_report_writes_the_page_where_asked(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.html"
    done = run_cli("report", run.name, "--run-dir", str(run.parent), "-o", str(out))
    assert (done.returncode, done.stderr) == (0, f"wrote {out}\n")
    assert out.read_text(encoding="utf-8") == render(run_report(read_run(run.parent, run.name)))
    printed = run_cli("report", run.name, "--run-dir", str(run.parent), "-o", "-")
    assert printed.returncode == 0 and printed.stdout == out.read_text(encoding="utf-8")


def test_report_writes_report_html_in_the_working_folder_by_default(run: Path, tmp_path: Path) -> None:
    done = run_cli("report", run.name, "--run-dir", str(run.parent), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_report_of_the_orchestrated_example_from_the_command_line(tmp_path: Path) -> None:
    example = EXAMPLES[0].parent / "orchestrated.todoflow"
    replies = example.parent / "replies" / "orchestrated.yaml"
    (tmp_path / "workspace").mkdir()
    ran = run_cli(
        "run", str(example), "--agent", f"scripted:{replies}", "--run-dir", "runs",
        "--workspace", "workspace", "--learnings", "learnings", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (run,) = [p.name for p in (tmp_path / "runs").iterdir()]
    done = run_cli("report", run, "--run-dir", "runs", "-o", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = done.stdout
    for anchor_ in [
        "step-publish",
        "step-publish-task-4",
        "step-publish-iteration-6",
        f"learning-{run}.3a.5",
    ]:
        assert f'id="{anchor_}"' in page, anchor_
    assert (
        page.count('<article class="learning"') == 2
    )  # the two routes' validated work; not the generic agent's
    assert "prevalidation failed: `site/index.html` does not exist in the workspace" in page
    assert page.count('class="who generic"') >= 1


def test_report_errors_name_the_problem(run: Path, tmp_path: Path) -> None:
    missing = run_cli("report", "nope", "--run-dir", str(run.parent))
    assert missing.returncode == 1 and missing.stderr.startswith("todoflow: error: no run `nope` in ")
    (tmp_path / "file").write_text("not a folder")
    inside_a_file = tmp_path / "file" / "r.html"
    nowhere = run_cli("report", run.name, "--run-dir", str(run.parent), "-o", str(inside_a_file))
    assert nowhere.returncode == 1
    assert nowhere.stderr.startswith(f"todoflow: error: cannot write the report to {inside_a_file}: ")


def test_a_damaged_run_is_refused(tmp_path: Path) -> None:
    folder = orchestrated(tmp_path)
    (folder / "journal.jsonl").unlink()
    done = run_cli("report", "p-1", "--run-dir", str(folder.parent), cwd=tmp_path)
    assert done.returncode == 1 and "journal.jsonl is missing" in done.stderr
    assert not (tmp_path / "report.html").exists()


def test_the_log_json_keeps_its_shape(run: Path) -> None:
    done = run_cli("log", run.name, "--run-dir", str(run.parent), "--json")
    data = json.loads(done.stdout)
    assert list(data) == ["version", "process_id", "completed", "steps"] and data["version"] == 1
    assert list(data["steps"][0])[:6] == ["step_id", "step_index", "title", "kind", "completed", "iterations"]


def test_bidi_controls_from_an_agent_are_shown_escaped_in_the_report_and_the_card(tmp_path: Path) -> None:
    """Bidirectional controls reorder what a reader sees around them: in actions, evidence
    and reasoning they are shown as escapes, as compilers show them in source text."""
    from todoflow.runtime.views.card import card_svg

    trick = "admin\u202e\u2066txt.exe\u2069"
    folder = orchestrated(tmp_path, say={"action": trick, "evidence": trick, "reasoning": trick})
    page = render(run_report(read_run(folder.parent, folder.name)))
    engine, _ = start(tmp_path / "card", FLOW)
    engine.step(engine.directive().attempt_id, confirm(0))
    card = card_svg(engine.step(engine.directive().attempt_id, intake(trick)))
    engine.close()
    for drawn in (page, card):
        assert not {"\u202e", "\u2066", "\u2069"} & set(drawn)
    assert page.count("admin\\u202e\\u2066txt.exe\\u2069") >= 3 and "admin\\u202e" in card
