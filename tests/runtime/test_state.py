"""The engine's node moves are the compiled machine's: checked in lockstep against the
python-statemachine class the compiler builds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import todoflow
from todoflow.runtime.state import move

from ..support.runtime_helpers import ChecklistModel

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
