"""The engine's node moves are the compiled machine's: checked in lockstep against the
python-statemachine class the compiler builds. The fold: `replayed`, in place, reaches the
state `replay` reaches entry by entry, from any entry, and changes no state it started from."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import todoflow
from todoflow.runtime.state import initial_state, move, replay, replayed
from todoflow.runtime.state import to_json as state_json

from ..support.runtime_helpers import ChecklistModel, confirm, intake, start, tasks, walk

FLOW = 'workflow w "W" {\n    todo_task t "T" {\n    }\n}\n'
EVENTS = ["submit_tasks", "confirm", "teleport_revise_tasks", "submit_revision"]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(st.sampled_from(EVENTS), max_size=25))
def test_engine_moves_match_the_statechart(tasks: int, events: list[str]) -> None:
    chart_class = todoflow.compile(FLOW).machine_class
    model = ChecklistModel(tasks)
    chart = chart_class(model=model)
    node, remaining = "intake", tasks
    for event in events:
        if node in ("end", "done"):
            break
        if event == "confirm" and node == "work":
            remaining -= 1
        target = move("todo_task", node, event, remaining > 0)
        model.remaining = remaining
        chart.send(event)
        if target is not None:
            node = target
        elif event == "confirm" and node == "work":
            remaining += 1  # not taken: undo
        roles = {s.split("_", 2)[-1] for s in chart.configuration_values if s.startswith("s1_t_")}
        expected = {"end"} if node == "end" else {node}
        assert roles == expected or (node == "end" and set(chart.configuration_values) == {"end"})


def test_revise_is_reachable_only_by_the_teleport() -> None:
    for node in ("intake", "work", "revise"):
        for event in EVENTS:
            target = move("todo_task", node, event, True)
            assert (target == "revise") == (event == "teleport_revise_tasks" and node == "work")


def test_regular_step_is_one_confirmation() -> None:
    assert move("regular", "work", "confirm", True) == "done"
    assert move("regular", "work", "teleport_revise_tasks", True) is None


HISTORY = """\
workflow w "W" {
    regular prep "Prepare" {
        description "Get the tools ready."
    }
    todo_task work "Work" {
        description "Do the work."
    }
}
"""


def test_replayed_in_place_reaches_the_state_replay_reaches_from_any_entry(tmp_path: Path) -> None:
    engine, store = start(tmp_path, HISTORY)
    revision = {
        "tasks": tasks("a", "B", "d"),
        "resume_from_task": 2,
        "progress_checklist_outcome": "b reworded, c dropped, d added",
        "progress_execution_outcome": "a kept",
    }
    replies = [
        confirm(0),
        intake("a", "b", "c"),
        confirm(1),
        {"create_todo": {"title": "e", "description": "e is done", "priority": "high"}},
        {"update_todo": {"todo_id": "todo_3", "status": "blocked", "notes": "waits"}},
        {"teleportTo": "teleport-revise-tasks"},
        revision,
        confirm(2),
        confirm(3),
    ]
    *_, final = walk(engine, replies)
    assert final.completed
    entries = store.entries()
    applied = list(replay(store.plan, initial_state(store.plan, store.started_at), entries))
    for cut, step in enumerate(applied):
        before = state_json(step.before)
        end, last = replayed(store.plan, step.before, entries[cut:])
        assert end == applied[-1].after(store.plan) == final.state
        assert last == applied[-1]
        assert state_json(step.before) == before  # folded in a draft of its own
    assert replayed(store.plan, final.state, []) == (final.state, None)
    engine.close()
