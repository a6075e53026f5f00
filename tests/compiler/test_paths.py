"""`todoflow paths`: the machine unfolded over positions, revisions, agents and blocking;
for every transition the shortest path through it, so every state and transition of the
graph, and every transition of the compiled machine, is on a path."""

from __future__ import annotations

import json
import re
from collections import deque
from itertools import pairwise
from pathlib import Path

import pytest

import todoflow
from todoflow.compiler.analysis import analyze, analyze_file
from todoflow.compiler.machine import workflow_machine
from todoflow.compiler.paths import FlowPaths, PathState, StepGraph, flow_paths

from ..conftest import EXAMPLES, ROOT, run_cli

RELEASE = ROOT / "examples" / "release.todoflow"


def _paths(path: Path, max_revisions: int = 1) -> FlowPaths:
    analysis = analyze_file(path)
    assert analysis.workflow is not None
    return flow_paths(analysis.workflow, workflow_machine(analysis.workflow), max_revisions)


def _machine_transitions(path: Path) -> set[tuple[str, str | None, str | None, str]]:
    compiled = todoflow.compile(path)
    compiled.raise_for_errors()
    return {(t.source, t.event, t.cond, t.target) for t in compiled.artifacts.machine.transitions}


def test_the_release_examples_paths_take_every_transition_of_its_machine() -> None:
    result = run_cli("paths", str(RELEASE), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    listed = {
        (t["source"], t["event"], t["cond"], t["target"])
        for step in data["steps"]
        for path in step["paths"]
        for event in path["events"]
        for t in event["machine"]
    }
    machine = _machine_transitions(RELEASE)
    assert listed == machine
    assert data["machine"] == {
        "class": "ReleaseWorkflow",
        "transitions": len(machine),
        "covered": len(machine),
    }
    assert [(s["step"], len(s["paths"])) for s in data["steps"]] == [("prepare", 2), ("ship", 45)]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_state_and_transition_is_on_a_path(path: Path) -> None:
    found = _paths(path)
    covered = {(t.source, t.event, t.cond, t.target) for t in found.covered()}
    assert covered == _machine_transitions(path)
    for graph in found.graphs:
        on_paths = [e for p in graph.paths for e in p.events]
        assert set(on_paths) == set(graph.events)
        assert {s for e in on_paths for s in (e.source, e.target)} == set(graph.states)


def _distances(graph: StepGraph) -> dict[PathState, int]:
    leaving: dict[PathState, list[PathState]] = {}
    for event in graph.events:
        leaving.setdefault(event.source, []).append(event.target)
    start = graph.states[0]
    distance = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for target in leaving.get(state, []):
            if target not in distance:
                distance[target] = distance[state] + 1
                queue.append(target)
    return distance


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_path_is_the_shortest_through_its_transition_from_start_to_end(path: Path) -> None:
    for graph in _paths(path).graphs:
        distance = _distances(graph)
        assert len({p.events for p in graph.paths}) == len(graph.paths)  # each path once
        for step_path in graph.paths:
            events = step_path.events
            assert events[0].source == graph.states[0] and events[-1].target.final
            assert all(a.target == b.source for a, b in pairwise(events))
            assert events.index(step_path.goal) == distance[step_path.goal.source]
        assert graph.paths[0].events == tuple(
            e for e in graph.paths[0].events if e.event in ("submit_tasks", "confirm")
        )  # the first path is the plain way through: the intake, then each confirmation


def test_the_revise_teleport_is_taken_at_each_position_up_to_k_times() -> None:
    for k in (0, 1, 2):
        ship = _paths(RELEASE, k).graph("ship")
        teleports = [sum(e.event == "teleport_revise_tasks" for e in p.events) for p in ship.paths]
        assert max(teleports) == k
        where = {e.position for p in ship.paths for e in p.events if e.event == "teleport_revise_tasks"}
        assert where == (set() if k == 0 else {1, 2, 3, 4})
    labels = [[e.label for e in p.events] for p in _paths(RELEASE).graph("ship").paths]
    assert [
        "intake",
        "confirm 1",
        "teleport at 2",
        "revise from 2",
        "confirm 2",
        "confirm 3",
        "confirm 4",
    ] in labels


def test_delegation_its_failure_and_blocking_at_each_position() -> None:
    ship = _paths(RELEASE).graph("ship")
    assert ship.agents == ("build", "generic") and ship.tasks == 4
    labels = {e.label for p in ship.paths for e in p.events}
    for position in range(1, 5):
        for agent in ship.agents:
            assert f"delegate {position} to {agent}" in labels
        assert {
            f"accept {position}",
            f"give back {position}",
            f"block {position}",
            f"resume {position}",
        } <= labels
    prepare = _paths(RELEASE).graph("prepare")
    assert [[e.label for e in p.events] for p in prepare.paths] == [
        ["confirm 1"],
        ["block 1", "resume 1", "confirm 1"],
    ]


CHECKLISTS = """\
workflow w "W" {
    todo_task fast "Fast" {
        mode learn_code
        route one "One" when "To do one" {
            regular first "First" {
            }
        }
        route two "Two" when "To do two" {
            regular second "Second" {
            }
        }
        generic off
    }

    todo_task composed "Composed" {
        generic off
    }
}
"""


def test_the_checklist_of_a_path_is_ready_a_todo_per_route_or_composed() -> None:
    analysis = analyze(CHECKLISTS, "w.todoflow")
    assert analysis.workflow is not None
    found = flow_paths(analysis.workflow, workflow_machine(analysis.workflow))
    fast, composed = found.graphs
    assert (fast.tasks, fast.checklist, fast.agents) == (2, "fast path", ("one", "two"))
    assert (composed.tasks, composed.checklist, composed.agents) == (2, "composed", ())
    assert not any(e.event == "delegate" for e in composed.events)  # nobody to delegate to


def test_the_docs_show_what_paths_prints() -> None:
    docs = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    block = next(
        b for b in re.findall(r"```console\n(.*?)```\n", docs, re.S) if b.startswith("$ todoflow paths")
    )
    command, _, shown = block.partition("\n")
    result = run_cli(*command.removeprefix("$ todoflow ").split())
    assert (result.returncode, result.stdout, result.stderr) == (0, shown, "")
    release = run_cli("paths", "examples/release.todoflow")
    assert "`todoflow paths examples/release.todoflow` lists 47 paths" in docs
    assert release.stdout.endswith("transitions of the machine ReleaseWorkflow on a path: 12 of 12\n")
    assert len(re.findall(r"^  (prepare|ship)-\d+: ", release.stdout, re.M)) == 47
    assert release.stdout == run_cli("paths", "examples/release.todoflow").stdout  # deterministic


def test_one_step_and_what_is_refused(tmp_path: Path) -> None:
    one = run_cli("paths", str(RELEASE), "--step", "prepare")
    assert one.returncode == 0
    assert one.stdout.splitlines()[0].startswith("step prepare (regular, 1 task the step itself)")
    assert "ship" not in one.stdout and "transitions of the machine" not in one.stdout
    unknown = run_cli("paths", str(RELEASE), "--step", "build-artifacts")
    assert unknown.returncode == 2
    assert "no step `build-artifacts` runs with paths; the steps that run: prepare, ship" in unknown.stderr
    negative = run_cli("paths", str(RELEASE), "--max-revisions", "-1")
    assert negative.returncode == 2 and "a whole number from 0" in negative.stderr
    broken = tmp_path / "broken.todoflow"
    broken.write_text('workflow w "W" {\n    regular a "A" {\n        next nowhere\n    }\n}\n')
    errors = run_cli("paths", str(broken))
    assert errors.returncode == 1 and "broken.todoflow:3:" in errors.stderr and errors.stdout == ""
