"""A path walked through the engine: what a walk sends and records, and each invariant's
check catching an engine broken on purpose (a test double per invariant). Every path of
every example is walked through the plugin in tests/cli/test_examples.py."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from todoflow.compiler.analysis import analyze_file
from todoflow.compiler.machine import workflow_machine
from todoflow.compiler.paths import FlowPaths, flow_paths
from todoflow.dsl.nodes import replace
from todoflow.runtime.agents import walk as walk_module
from todoflow.runtime.agents.walk import InvariantBroken, Walk, walk
from todoflow.runtime.definition import RunDefinition, from_source, read_definition
from todoflow.runtime.directive import Directive
from todoflow.runtime.engine import Engine, Refusal
from todoflow.runtime.llm_choice import Usage
from todoflow.runtime.plan import Llm
from todoflow.runtime.state import ProcessState

from ...conftest import ROOT


def _flow(path: Path, max_revisions: int = 1) -> tuple[RunDefinition, FlowPaths]:
    analysis = analyze_file(path)
    assert analysis.workflow is not None
    paths = flow_paths(analysis.workflow, workflow_machine(analysis.workflow), max_revisions)
    return read_definition(path).or_raise(), paths


def _walk_all(path: Path, tmp_path: Path, max_revisions: int = 1) -> Iterator[Walk]:
    definition, paths = _flow(path, max_revisions)
    for graph in paths.graphs:
        for number, step_path in enumerate(graph.paths):
            workspace = tmp_path / f"{step_path.id}-{number}"
            workspace.mkdir()
            yield walk(definition, paths, step_path, workspace)


def _broken(path: Path, tmp_path: Path) -> list[str]:
    """The invariants the walks of `path` find broken (one message per failing path)."""
    found = []
    definition, paths = _flow(path)
    for graph in paths.graphs:
        for step_path in graph.paths:
            workspace = tmp_path / step_path.id
            workspace.mkdir()
            try:
                walk(definition, paths, step_path, workspace)
            except InvariantBroken as broken:
                found.append(str(broken))
    return found


def test_a_walk_blocks_resumes_delegates_and_writes_only_the_files_a_completion_needs(tmp_path: Path) -> None:
    definition, paths = _flow(ROOT / "examples" / "orchestrated.todoflow")
    graph = paths.graph("publish")
    wanted = ["intake", "block 1", "resume 1", "confirm 1", "confirm 2", "confirm 3"]
    path = next(p for p in graph.paths if [e.label for e in p.events] == wanted)
    walked = walk(definition, paths, path, tmp_path)
    assert [(t.label, t.node, t.position, t.status) for t in walked.taken] == [
        ("intake", "work", 1, "running"),
        ("block 1", "work", 1, "blocked"),
        ("resume 1", "work", 1, "running"),
        ("confirm 1", "work", 2, "running"),
        ("confirm 2", "work", 3, "running"),
        ("confirm 3", "finished", 1, "complete"),
    ]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["publish.json"]
    through = next(
        p
        for p in graph.paths
        if [e.label for e in p.events][:3] == ["intake", "delegate 1 to build", "accept 1"]
    )
    other = tmp_path / "other"
    other.mkdir()
    walk(definition, paths, through, other)
    assert (other / "site" / "index.html").is_file()  # the route's expected file, before its answer


def test_more_revisions_walk_too(tmp_path: Path) -> None:
    walks = list(_walk_all(ROOT / "examples" / "seed-orchestrator.todoflow", tmp_path, max_revisions=2))
    assert any(sum(t.label.startswith("revise") for t in w.taken) == 2 for w in walks)


TIGHT = """\
workflow tight "Tight" {
    todo_task t "T" {
        max_turns 2
        tasks {
            "One" => "one done"
            "Two" => "two done"
            "Three" => "three done"
        }
    }
}
"""


def test_a_path_longer_than_max_turns_raises_the_bound_and_goes_on(tmp_path: Path) -> None:
    definition = from_source(TIGHT, "tight.todoflow").or_raise()
    analysis = analyze_file(_write(tmp_path, TIGHT))
    assert analysis.workflow is not None
    paths = flow_paths(analysis.workflow, workflow_machine(analysis.workflow))
    walked = walk(definition, paths, paths.graphs[0].paths[0], tmp_path)
    labels = [t.label for t in walked.taken]
    assert labels == ["intake", "confirm 1", "confirm 2", "raise turns", "confirm 3"]


def _write(tmp_path: Path, source: str) -> Path:
    file = tmp_path / "flow.todoflow"
    file.write_text(source)
    return file


# -- engines broken on purpose: each invariant's check catches its own ------------------


class ConfirmsTwice(Engine):
    """Applies a confirmation again, to the next todo, whenever one is left."""

    def step(
        self, attempt: str, data: Mapping[str, Any], by: str = "agent", usage: Sequence[Usage] = ()
    ) -> Directive:
        directive = super().step(attempt, data, by, usage)
        state = directive.state
        if (
            "evidence" in data
            and state.node == "work"
            and state.position <= state.total
            and state.position > 1
        ):
            return super().step(directive.attempt_id, data, by)
        return directive


class RefusalSpends(Engine):
    """Journals a model call for every refused reply."""

    def step(
        self, attempt: str, data: Mapping[str, Any], by: str = "agent", usage: Sequence[Usage] = ()
    ) -> Directive:
        try:
            return super().step(attempt, data, by, usage)
        except Refusal:
            current = self.directive()
            if not current.completed:
                self.record_usage(
                    current.attempt_id, [Usage("orchestrator", Llm("fake", "m"), "default", 1, 1, 1)]
                )
            raise


class CompletesEarly(Engine):
    """Says the run is complete one task before the end of its last step."""

    def _directive(self, state: ProcessState) -> Directive:
        last = self.plan.steps[-1].id
        if state.step_id == last and state.node == "work" and state.total and state.position == state.total:
            state = replace(state, step_id=None, node="finished")
        return super()._directive(state)


class HandsOutTwo(Engine):
    """Shows the todo after the current one in progress too."""

    def _directive(self, state: ProcessState) -> Directive:
        if state.node == "work" and state.position < state.total:
            state = replace(state, marks=state.with_mark(state.position + 1, status="in_progress"))
        return super()._directive(state)


class ReopensDoneTasks(Engine):
    """Resumes every revision from the first task, undoing what was confirmed."""

    def step(
        self, attempt: str, data: Mapping[str, Any], by: str = "agent", usage: Sequence[Usage] = ()
    ) -> Directive:
        if "resume_from_task" in data:
            data = {**data, "resume_from_task": 1}
        return super().step(attempt, data, by, usage)


DOUBLES = [
    (ConfirmsTwice, walk_module.ONCE),
    (RefusalSpends, walk_module.REFUSALS),
    (CompletesEarly, walk_module.COMPLETES),
    (HandsOutTwo, walk_module.ONE_TASK),
    (ReopensDoneTasks, walk_module.STABLE),
]


@pytest.mark.parametrize(("double", "invariant"), DOUBLES, ids=[d.__name__ for d, _ in DOUBLES])
def test_a_broken_engine_fails_the_walk_naming_the_invariant(
    double: type[Engine], invariant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "Engine", double)
    broken = _broken(ROOT / "examples" / "release.todoflow", tmp_path)
    assert broken, f"{double.__name__} went unnoticed"
    assert all(message.startswith(f"{invariant}: broken at ") for message in broken), broken[0]
    assert " on path ship-" in broken[-1] or " on path prepare-" in broken[-1]


def test_the_docs_list_every_invariant_a_walk_checks() -> None:
    docs = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    table = docs.split("| invariant | how |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^\| (.*?) \| ", table, re.M) == list(walk_module.INVARIANTS)
