"""The run card's values and text: what a finished run and its finished steps were.

The image itself is checked in a browser (tests/runtime/views/test_browser.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from todoflow.runtime import process
from todoflow.runtime.store.base import final_todos
from todoflow.runtime.views.card import card_data, card_svg, card_text

from ...conftest import ROOT, run_cli
from ...support.runtime_helpers import CHECKLIST, confirm, intake, start, walk

EXAMPLE = ROOT / "examples" / "release.todoflow"
REPLIES = ROOT / "examples" / "replies" / "release.yaml"


def _complete_release(tmp_path: Path) -> Path:
    result = run_cli("run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    return run


def test_a_complete_run_shows_its_last_checklist_and_the_result(tmp_path: Path) -> None:
    run = _complete_release(tmp_path)
    card = json.loads(run_cli("status", run.name, "--json", cwd=tmp_path).stdout)
    assert card["status"] == "complete" and card["result"] == {} and card["current"] is None
    checklist = card["checklist"]
    assert (checklist["step"], checklist["done"], checklist["total"]) == ("ship", 5, 5)
    assert [t["result"] for t in checklist["tasks"]][-2:] == ["tag pushed", "announced"]
    assert card["prepare"]["length"] == 5
    assert [(s["id"], s["done"], s["total"]) for s in card["finished_steps"]] == [
        ("prepare", None, None),
        ("ship", 5, 5),
    ]
    text = run_cli("status", run.name, cwd=tmp_path).stdout
    assert "[Checklist] ship: 5/5 done" in text
    assert "    5. Announce on the mailing list — announced" in text
    assert "✓ prepare: done" in text and "✓ ship: 5/5 done" in text
    run_cli("status", run.name, "--svg", "card.svg", cwd=tmp_path)
    image = (tmp_path / "card.svg").read_text()
    assert "5/5 done" in image and "result {}" in image and "all 5 tasks done" in image
    assert "0/0 done" not in image and "no checklist yet" not in image


def test_a_running_card_names_the_current_block_and_every_task(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    try:
        *_, directive = walk(engine, [intake("sweep", "mop", "dust"), confirm(1)])
        data = card_data(directive)
        assert data["current"] == "work" and data["work"]["role"] == "Task 2/3"
        assert [(t["state"], t["result"]) for t in data["checklist"]["tasks"]] == [
            ("done", "outcome 1"),
            ("current", None),
            ("pending", None),
        ]
        revising = engine.step(directive.attempt_id, {"teleportTo": "teleport-revise-tasks"})
        assert card_data(revising)["current"] == "work" and card_data(revising)["work"]["role"] == (
            "Revise checklist"
        )
        assert "Revise checklist" in card_svg(revising)
    finally:
        store.close()
    fresh, fresh_store = start(tmp_path / "fresh", CHECKLIST)
    try:
        assert card_data(fresh.directive())["current"] == "checklist"
        assert "[Prepare]   no checklist yet" in card_text(fresh.directive())
    finally:
        fresh_store.close()


def test_final_todos_come_from_the_journal_whatever_the_derived_files_hold(tmp_path: Path) -> None:
    run = _complete_release(tmp_path)
    with process.open_process(run.parent, run.name)[0] as engine:
        finished = final_todos(engine.store, ["prepare", "ship", "nope"])
    assert sorted(finished) == ["ship"]
    (run / "todos" / "ship.json").write_text("{not json")
    with process.open_process(run.parent, run.name)[0] as engine:
        assert final_todos(engine.store, ["ship"]) == finished
    assert run_cli("status", run.name, "--json", cwd=tmp_path).returncode == 0


def test_png_without_a_browser_says_what_to_install(tmp_path: Path) -> None:
    run = _complete_release(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "todoflow", "status", run.name, "--png", "card.png"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": str(tmp_path)},
        check=False,
    )
    assert result.returncode == 1
    assert "--png needs a Chromium or Chrome browser" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "card.png").exists()


def test_status_json_gives_each_task_its_constraints(tmp_path: Path) -> None:
    """Issue 26, small things: the constraints of a ready checklist's tasks, while the step
    runs and once it is finished (where todos.json, which has no place for them, is not
    what they are read from)."""
    (tmp_path / "branch.json").write_text("{}")
    typed = "made the branch\nbranch created\nquit\n"  # stops at ship's first task
    assert run_cli("run", str(EXAMPLE), "--agent", "human", stdin=typed, cwd=tmp_path).returncode == 3
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    running = json.loads(run_cli("status", run.name, "--json", cwd=tmp_path).stdout)
    rule = ["Never push to main directly"]
    assert {t["action"]: t["constraints"] for t in running["checklist"]["tasks"]} == {
        "Build wheels and sdist": rule,
        "Write release notes": [],
        "Tag the release": rule,
        "Announce on the mailing list": [],
    }
    (tmp_path / "done").mkdir()
    done = _complete_release(tmp_path / "done")
    card = json.loads(run_cli("status", done.name, "--json", cwd=tmp_path / "done").stdout)
    constrained = [t["action"] for t in card["checklist"]["tasks"] if t["constraints"] == rule]
    assert constrained == ["Build wheels and sdist", "Tag the release"]
    (ship,) = [s for s in card["finished_steps"] if s["id"] == "ship"]
    assert [t["constraints"] for t in ship["tasks"]] == [t["constraints"] for t in card["checklist"]["tasks"]]


def test_a_created_todo_is_counted_and_no_summary_says_otherwise(tmp_path: Path) -> None:
    """Issue 26, small things: after create_todo the card counts 4 tasks, and the summary
    the caller wrote for the ready checklist holds no count of 3 beside them."""
    flow = 'workflow w "W" {\n    todo_task t "T" {\n        tasks {\n'
    flow += "".join(f'            "do {n}" => "{n} done"\n' for n in (1, 2, 3)) + "        }\n    }\n}\n"
    engine, store = start(tmp_path, flow)
    try:
        directive = engine.directive()
        directive = engine.step(directive.attempt_id, directive.ready_reply() or {}, "caller")
        created = {"create_todo": {"title": "do 4", "description": "4 done"}}
        *_, at_four = walk(engine, [created, confirm(1), confirm(2), confirm(3)])
        working = card_text(at_four)
        done = engine.step(at_four.attempt_id, confirm(4))
        image = card_svg(done, final_todos(engine.store, done.state.completed_steps))
    finally:
        store.close()
    assert "[Checklist] 3/4 done — the ready checklist, passed on unchanged" in working
    assert "[Prepare]   task 4 of 4" in working
    assert "4/4 done (t)" in image and "3 ordered tasks" not in image
