"""The engine's rules, one test each (seeds/moira-todo-list: intake, cursor, revise, completion)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from todoflow.compiler import formats
from todoflow.runtime.engine import Refusal
from todoflow.runtime.events import todos
from todoflow.runtime.state import attempt_id

from ..support.runtime_helpers import (
    CHECKLIST,
    confirm,
    events,
    folder_digest,
    intake,
    read_journal,
    start,
    tasks,
    walk,
)


def _refusal(engine, reply, attempt=None) -> Refusal:  # type: ignore[no-untyped-def]
    directive = engine.directive()
    with pytest.raises(Refusal) as caught:
        engine.step(attempt or directive.attempt_id, reply)
    return caught.value


def test_intake_takes_1_to_100_tasks(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    assert _refusal(engine, intake()).reason == "tasks is empty; at least 1 item is needed"
    many = intake(*(f"t{i}" for i in range(101)))
    assert _refusal(engine, many).reason == "tasks holds 101 tasks; at most 100"
    directive = engine.step(engine.directive().attempt_id, intake(*(f"t{i}" for i in range(100))))
    assert (directive.role, directive.state.total) == ("Task 1/100", 100)


@pytest.mark.parametrize(
    ("task", "reason"),
    [
        ({"action": "", "expected_result": "x"}, "tasks[0].action is empty"),
        ({"action": "   ", "expected_result": "x"}, "tasks[0].action is empty"),
        (
            {"action": "a" * 1001, "expected_result": "x"},
            "tasks[0].action is 1,001 characters; at most 1,000",
        ),
        (
            {"action": "a", "expected_result": "b" * 1200},
            "tasks[0].expected_result is 1,200 characters; at most 1,000",
        ),
        ({"action": "a"}, "tasks[0].expected_result is missing"),
        ({"action": "a", "expected_result": "b", "id": 3}, "`tasks[0].id` is not part of this reply"),
    ],
)
def test_task_texts_are_bounded(tmp_path: Path, task: dict[str, object], reason: str) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    assert _refusal(engine, {"tasks": [task], "progress_checklist_outcome": "x"}).reason == reason


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            {"evidence": "e" * 612, "progress_execution_outcome": "ok"},
            "evidence is 612 characters; at most 500",
        ),
        (
            {"evidence": "ok", "progress_execution_outcome": "o" * 501},
            "progress_execution_outcome is 501 characters; at most 500",
        ),
        ({"evidence": "", "progress_execution_outcome": "ok"}, "evidence is empty"),
        ({"evidence": "ok", "progress_execution_outcome": " \n"}, "progress_execution_outcome is empty"),
        ({"evidence": "ok"}, "progress_execution_outcome is missing"),
        (
            {"tasks": tasks("x"), "progress_checklist_outcome": "x"},
            "`tasks`, `progress_checklist_outcome` is not part of a reply at work: "
            "it takes `evidence` and `progress_execution_outcome`, or `teleportTo`",
        ),
    ],
)
def test_confirmations_are_bounded(tmp_path: Path, reply: dict[str, object], reason: str) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b")]))
    assert _refusal(engine, reply).reason.startswith(reason)


def test_a_valid_confirmation_advances_the_cursor_exactly_once(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    first, second = walk(engine, [intake("a", "b", "c"), confirm(1)])
    assert (first.state.position, second.state.position) == (1, 2)
    assert second.role == "Task 2/3"
    with pytest.raises(Refusal):
        engine.step(first.attempt_id, confirm(1))  # the same reply again: its attempt is used
    assert engine.directive().state.position == 2


def test_every_directive_has_a_fresh_attempt_and_stale_ones_change_nothing(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    seen = {engine.directive().attempt_id}
    for directive in walk(engine, [intake("a", "b", "c"), confirm(1), confirm(2)]):
        assert directive.attempt_id not in seen
        seen.add(directive.attempt_id)
    before = folder_digest(store.folder)
    refusal = _refusal(engine, confirm(3), attempt=attempt_id("p-1", 0))
    assert "stale or used" in refusal.reason
    assert refusal.directive.attempt_id == engine.directive().attempt_id
    assert refusal.directive.role == "Task 3/3"
    assert folder_digest(store.folder) == before


def test_refusals_leave_the_run_byte_for_byte_unchanged(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b")]))
    before = folder_digest(store.folder)
    for reply in (
        {"evidence": "e" * 612, "progress_execution_outcome": "ok"},
        {"teleportTo": "elsewhere"},
        {"resume_from_task": 1},
        "not an object",
    ):
        refusal = _refusal(engine, reply)  # type: ignore[arg-type]
        assert refusal.reason
    assert folder_digest(store.folder) == before


def test_teleport_only_from_work(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    reason = _refusal(engine, {"teleportTo": "teleport-revise-tasks"}).reason
    assert reason.startswith("teleportTo is only possible while working on a task")
    regular, _ = start(tmp_path / "regular", 'workflow w "W" {\n  regular a "A" {\n  }\n}\n')
    assert "todo_task" in _refusal(regular, {"teleportTo": "teleport-revise-tasks"}).reason


def _revise(engine, new_tasks, resume, checklist="revised", work="kept"):  # type: ignore[no-untyped-def]
    directive = engine.step(engine.directive().attempt_id, {"teleportTo": "teleport-revise-tasks"})
    assert directive.role == "Revise checklist"
    return engine.step(
        directive.attempt_id,
        {
            "tasks": new_tasks,
            "resume_from_task": resume,
            "progress_checklist_outcome": checklist,
            "progress_execution_outcome": work,
        },
    )


def test_revision_keeps_positions_and_counts_the_prefix_as_done(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b", "c"), confirm(1), confirm(2)]))
    directive = _revise(engine, tasks("a", "B", "c", "d"), resume=3)
    state = directive.state
    assert (state.position, state.total, directive.role) == (3, 4, "Task 3/4")
    assert [t.action for t in state.tasks] == ["a", "B", "c", "d"]
    # only the unchanged completed prefix keeps its result
    assert state.progress.results == ("outcome 1", "Pending", "Pending", "Pending")
    assert (state.progress.checklist, state.progress.work) == ("revised", "kept")


def test_revision_resume_bounds(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b"), {"teleportTo": "teleport-revise-tasks"}]))
    reply = {"tasks": tasks("a", "b"), "progress_checklist_outcome": "c", "progress_execution_outcome": "w"}
    assert _refusal(engine, reply | {"resume_from_task": 0}).reason == "resume_from_task is 0; at least 1"
    assert _refusal(engine, reply | {"resume_from_task": 4}).reason == (
        "resume_from_task is 4; at most 3 (one past the last task)"
    )


def test_revision_past_the_end_completes(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    (tmp_path / "workspace" / "out.txt").write_text("done")
    list(walk(engine, [intake("a", "b"), confirm(1)]))
    directive = _revise(engine, tasks("a", "b"), resume=3)
    assert directive.completed and directive.to_json() == {
        "processId": "p-1",
        "completed": True,
        "result": {},
    }


def test_revision_deleting_the_remaining_tail_completes_without_an_extra_step(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    (tmp_path / "workspace" / "out.txt").write_text("done")
    list(walk(engine, [intake("a", "b", "c"), confirm(1)]))
    directive = _revise(engine, tasks("a"), resume=2)
    assert directive.completed
    assert [e.TYPE for e in store.entries()] == ["submit_tasks", "confirm", "teleport", "revise"]


def test_completion_needs_the_expected_files(tmp_path: Path) -> None:
    source = 'workflow w "W" {\n  regular a "A" {\n    expect file "report.md"\n  }\n}\n'
    engine, _ = start(tmp_path, source)
    reason = _refusal(engine, confirm(1)).reason
    assert reason == "step `a` cannot complete: its expected file `report.md` does not exist in the workspace"
    (tmp_path / "workspace" / "report.md").write_text("# report")
    assert engine.step(engine.directive().attempt_id, confirm(1)).completed


def test_a_ready_checklist_is_passed_on_unchanged(tmp_path: Path) -> None:
    from todoflow.runtime import process

    source = (
        'workflow w "W" {\n  todo_task t "T" {\n    tasks {\n'
        '      a: "a" => "a is done"\n      "b" => "b is done"\n'
        '      constraint "Careful" on a\n    }\n  }\n}\n'
    )
    engine, store = start(tmp_path, source)
    directive = engine.directive()
    assert [t.action for t in directive.ready_tasks or ()] == ["a", "b"]
    assert (
        _refusal(engine, intake("a")).reason
        == "tasks holds 1 tasks; the ready checklist has 2, passed on unchanged"
    )
    assert _refusal(engine, intake("a", "B")).reason.startswith(
        "tasks[1].action differs from the ready checklist"
    )
    after = engine.step(directive.attempt_id, intake("a", "b"))
    assert after.role == "Task 1/2" and after.state.tasks[0].constraints == ("Careful",)
    # the journal names the ready checklist instead of copying it; the plan holds it
    (entry,) = read_journal(store.folder)
    assert entry["ready"] is True and "tasks" not in entry
    assert store.entries()[0].tasks is None
    reopened, _ = process.open_process(tmp_path / "runs", "p-1")
    assert reopened.directive().state == after.state


def test_the_intake_prompt_lists_the_ready_checklist(tmp_path: Path) -> None:
    """The intake's template reads `ready_tasks` (the only kind that may); the context of a
    later node does not build it."""
    source = 'workflow w "W" {\n  todo_task t "T" {\n    tasks {\n      "a" => "a is done"\n    }\n  }\n}\n'
    engine, _ = start(tmp_path, source)
    directive = engine.directive()
    assert "1. a => a is done" in directive.prompt()
    after = engine.step(directive.attempt_id, intake("a"))
    assert after.context()["ready_tasks"] == []


READY_WITH_CONSTRAINTS = (
    'workflow w "W" {\n  todo_task t "T" {\n    tasks {\n'
    '      a: "a" => "a is done"\n      b: "b" => "b is done"\n      "c" => "c is done"\n'
    '      constraint "Careful" on a\n      constraint "Slowly" on b\n    }\n  }\n}\n'
)


def test_the_ready_checklist_passes_back_exactly_as_handed_out(tmp_path: Path) -> None:
    """Issue 26: `ready_tasks` carries constraints, and sending it back verbatim is the
    round trip the intake prompt asks for."""
    engine, _ = start(tmp_path, READY_WITH_CONSTRAINTS)
    directive = engine.directive()
    handed = directive.to_json()["ready_tasks"]
    assert handed[0]["constraints"] == ["Careful"]
    after = engine.step(directive.attempt_id, {"tasks": handed, "progress_checklist_outcome": "three"})
    assert after.role == "Task 1/3"
    assert [t.constraints for t in after.state.tasks] == [("Careful",), ("Slowly",), ()]


def test_constraints_that_differ_from_the_ready_list_are_refused_all_named(tmp_path: Path) -> None:
    engine, store = start(tmp_path, READY_WITH_CONSTRAINTS)
    handed = engine.directive().to_json()["ready_tasks"]
    changed = [
        {**handed[0], "constraints": ["Boldly"]},
        {**handed[1], "constraints": []},
        {**handed[2], "constraints": ["Invented"]},
    ]
    reason = _refusal(engine, {"tasks": changed, "progress_checklist_outcome": "x"}).reason
    assert reason.startswith(
        "tasks[0].constraints, tasks[1].constraints, tasks[2].constraints differ from the ready checklist's"
    )
    reworded = [{**t, "action": t["action"] + "!"} for t in handed]
    assert _refusal(engine, {"tasks": reworded, "progress_checklist_outcome": "x"}).reason.startswith(
        "tasks[0].action, tasks[1].action, tasks[2].action differ from the ready checklist"
    )
    assert store.entries() == []


def test_an_agent_never_writes_constraints_of_its_own(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    composed = {"tasks": [{"action": "a", "expected_result": "b", "constraints": ["Mine"]}]}
    reason = _refusal(engine, {**composed, "progress_checklist_outcome": "x"}).reason
    assert reason.startswith("tasks[0].constraints: a checklist the agent composes has no constraints")


def test_a_revision_may_pass_back_the_constraints_a_task_keeps(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, READY_WITH_CONSTRAINTS)
    handed = engine.directive().to_json()["ready_tasks"]
    list(
        walk(
            engine,
            [{"tasks": handed, "progress_checklist_outcome": "x"}, {"teleportTo": "teleport-revise-tasks"}],
        )
    )
    listed = engine.directive().to_json()["tasks"]
    revision = {"resume_from_task": 1, "progress_checklist_outcome": "x", "progress_execution_outcome": "y"}
    moved = [listed[1], listed[0], listed[2]]  # moved tasks do not keep their constraints
    reason = _refusal(engine, {**revision, "tasks": moved}).reason
    assert reason.startswith(
        "tasks[0].constraints, tasks[1].constraints differ from the ones these tasks keep"
    )
    after = engine.step(engine.directive().attempt_id, {**revision, "tasks": listed})
    assert [t.constraints for t in after.state.tasks] == [("Careful",), ("Slowly",), ()]


def test_a_refusal_names_every_offending_item_not_the_first_three(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    items = [{"action": "a", "expected_result": "b", "id": n} for n in range(5)]
    reason = _refusal(engine, {"tasks": items, "progress_checklist_outcome": "x"}).reason
    assert reason == (
        "`tasks[0].id`, `tasks[1].id`, `tasks[2].id`, `tasks[3].id`, `tasks[4].id` are not part of this reply"
    )
    empty = [{"action": "", "expected_result": "b"} for _ in range(4)]
    reason = _refusal(engine, {"tasks": empty, "progress_checklist_outcome": "x"}).reason
    assert reason.count("is empty") == 4 and "tasks[3].action is empty" in reason


def test_evidence_lives_only_in_the_history(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    (tmp_path / "workspace" / "out.txt").write_text("done")
    secret = {"evidence": "THE-EVIDENCE-TEXT", "progress_execution_outcome": "shown outcome"}
    *_, final = walk(engine, [intake("a"), secret])
    assert final.to_json()["result"] == {}
    todos = (store.folder / "todos" / "work.json").read_text()
    assert "THE-EVIDENCE-TEXT" not in todos and "shown outcome" in todos
    assert "THE-EVIDENCE-TEXT" not in json.dumps(final.state.progress.results)
    completed = [e for e in events(store.folder) if e["event"] == "TodoTaskItemCompleted"]
    assert completed[0]["evidence"] == "THE-EVIDENCE-TEXT"


def test_todos_json_is_the_formats_todos_document(tmp_path: Path) -> None:
    """todos.json is written without validating it each time: it must stay what the model writes."""
    engine, store = start(tmp_path, CHECKLIST)
    step = store.plan.step("work")
    seen = []
    for _ in walk(engine, [intake("a", "b\u00e9", "c \u201cq\u201d"), confirm(1), confirm(2)]):
        seen.append(todos(step, store.state()))
    _revise(engine, tasks("a", "B", "c", "d"), resume=2)
    seen.append(todos(step, store.state()))
    for text in seen:
        assert formats.Todos.model_validate_json(text).to_json() == text
    assert '"status": "in_progress"' in seen[-1] and "\u00e9" in seen[0]


def test_a_step_completion_fills_the_spare_made_when_the_run_began(tmp_path: Path) -> None:
    """Creating a file can cost more than a step, so each todo_task step's todos file is
    a spare made when the run folder is first opened, filled and renamed at completion."""
    engine, store = start(tmp_path, CHECKLIST)
    todos_folder = store.folder / "todos"
    assert sorted(p.name for p in todos_folder.iterdir()) == [".spare-work"]
    (tmp_path / "workspace" / "out.txt").write_text("done")
    *_, final = walk(engine, [intake("a"), confirm(1)])
    assert final.completed
    assert sorted(p.name for p in todos_folder.iterdir()) == ["work.json"]


def test_progress_is_display_only(tmp_path: Path) -> None:
    def run(folder: Path, outcome: str) -> list[tuple[str, int, int, str]]:
        engine, _ = start(folder, CHECKLIST)
        replies = [intake("a", "b"), {"evidence": "e", "progress_execution_outcome": outcome}]
        return [(d.node, d.state.position, d.state.total, d.attempt_id) for d in walk(engine, replies)]

    assert run(tmp_path / "one", "short") == run(tmp_path / "two", "a different display text")


def test_regular_step_is_one_confirmation_then_the_next_step(tmp_path: Path) -> None:
    source = (
        'workflow w "W" {\n  regular a "A" {\n    description "Do A."\n  }\n  todo_task b "B" {\n  }\n}\n'
    )
    engine, _ = start(tmp_path, source)
    first = engine.directive()
    assert (first.role, first.task.action if first.task else None) == ("Task 1/1", "Do A.")
    assert engine.step(first.attempt_id, confirm(1)).node == "intake"


def test_racing_confirmations_with_one_attempt_id_exactly_one_wins(tmp_path: Path) -> None:
    from todoflow.runtime import process

    engine, _ = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b", "c")]))
    attempt = engine.directive().attempt_id
    engines = [process.open_process(tmp_path / "runs", "p-1")[0] for _ in range(8)]
    results: list[str] = []
    barrier = threading.Barrier(len(engines))

    def race(racer: object) -> None:
        barrier.wait()
        try:
            racer.step(attempt, confirm(1))  # type: ignore[attr-defined]
            results.append("won")
        except Refusal:
            results.append("refused")

    threads = [threading.Thread(target=race, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["refused"] * 7 + ["won"]
    assert engine.directive().state.position == 2


def test_a_reopened_run_reads_a_journal_longer_than_one_read(tmp_path: Path) -> None:
    """Opening reads the journal a piece at a time up to its zero tail; an entry that
    spans pieces (100 tasks of 1,000 characters) must come back whole."""
    from todoflow.runtime import process

    engine, _ = start(tmp_path, CHECKLIST)
    long = [{"action": f"{i} " + "a" * 990, "expected_result": "b" * 1000} for i in range(100)]
    replies = [{"tasks": long, "progress_checklist_outcome": "long"}, confirm(1), confirm(2)]
    *_, live = walk(engine, replies)
    reopened, _ = process.open_process(tmp_path / "runs", "p-1")
    assert reopened.directive().state == live.state
    assert (live.state.position, live.state.total) == (3, 100)


def test_two_processes_stepping_one_run_keep_events_in_order(tmp_path: Path) -> None:
    """Each store derives the events of the entries it applied; whichever flushes later
    skips what the other wrote, and a gap rebuilds the file from the journal."""
    from todoflow.runtime import process

    source = 'workflow w "W" {\n  todo_task t "T" {\n  }\n}\n'
    first, one = start(tmp_path, source)
    second, two = process.open_process(tmp_path / "runs", "p-1")
    first.step(first.directive().attempt_id, intake("a", "b", "c"))
    second.step(second.directive().attempt_id, confirm(1))
    two.close()  # its entry's events come after the first store's, still unwritten: a gap
    first.step(first.directive().attempt_id, confirm(2))
    one.close()
    assert [e["seq"] for e in events(one.folder)] == sorted(e["seq"] for e in events(one.folder))
    alone, store = start(tmp_path / "alone", source)
    list(walk(alone, [intake("a", "b", "c"), confirm(1), confirm(2)]))
    store.close()

    def kept(folder: Path) -> list[tuple[str, int]]:
        return [(e["event"], e["seq"]) for e in events(folder)]

    assert kept(one.folder) == kept(store.folder)


def test_the_lock_is_released_when_unlocking_is_interrupted(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C can land as the file lock is released; the thread lock must not stay held
    (the driver's `finally: store.close()` would wait for it forever)."""
    import fcntl

    from todoflow.runtime.store import folder as store_module

    engine, store = start(tmp_path, CHECKLIST)
    real = fcntl.flock

    def interrupted(handle: int, operation: int) -> None:
        real(handle, operation)
        if operation == fcntl.LOCK_UN:
            raise KeyboardInterrupt

    monkeypatch.setattr(store_module.fcntl, "flock", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.directive()
    monkeypatch.setattr(store_module.fcntl, "flock", real)
    assert not store._thread_lock.locked()
    store.close()


def test_repair_sees_an_entrys_events_cut_at_a_line_end(tmp_path: Path) -> None:
    """A crash can cut a batch of events at the end of a line inside one entry's events:
    the last line still names the last entry, yet an event of it is missing."""
    from todoflow.runtime import process

    engine, store = start(tmp_path, 'workflow w "W" {\n  todo_task t "T" {\n  }\n}\n')
    list(walk(engine, [intake("a"), confirm(1)]))  # the last entry: two events
    store.close()
    path = store.folder / "events.jsonl"
    whole = path.read_bytes()
    lines = whole.splitlines(keepends=True)
    assert [json.loads(line)["seq"] for line in lines[-2:]] == [2, 2]
    path.write_bytes(b"".join(lines[:-1]))
    _, reopened = process.open_process(tmp_path / "runs", "p-1")
    assert reopened.repair() is True
    assert path.read_bytes() == whole
    assert reopened.repair() is False


def test_a_refusal_at_work_lists_every_form_it_takes_the_todo_tools_too(tmp_path: Path) -> None:
    engine, _ = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b")]))
    reason = _refusal(engine, {"mood": "fine"}).reason
    assert reason == (
        "`mood` is not part of a reply at work: it takes `evidence` and `progress_execution_outcome`, "
        "or `teleportTo`, or a decision (`next_action`), or a todo tool (`create_todo`, `update_todo`, "
        "`complete_todo`, `list_todos`, `get_todo`)"
    )
    read = _refusal(engine, {"list_todos": {}}).reason
    assert read == "list_todos reads the todos and changes nothing: it is a tool of its own, not a reply"


def test_a_task_a_revision_leaves_as_it_was_keeps_its_created_at(tmp_path: Path) -> None:
    """Issue 26, small things: only the tasks a revision makes are created by it."""
    engine, store = start(tmp_path, CHECKLIST)
    list(walk(engine, [intake("a", "b", "c"), confirm(1)]))
    step = store.plan.step("work")
    before = {t["id"]: t for t in json.loads(todos(step, store.state()))["todos"]}
    _revise(engine, tasks("a", "b", "C"), resume=2)
    after = {t["id"]: t for t in json.loads(todos(step, store.state()))["todos"]}
    assert after["todo_2"]["created_at"] == before["todo_2"]["created_at"]
    assert after["todo_3"]["created_at"] > before["todo_3"]["created_at"]
