"""A pytest plugin for workflow authors: pin a compiled workflow with one line.

    def test_release_flow(todoflow_snapshot):
        todoflow_snapshot("flows/release.todoflow")

The `todoflow_snapshot` fixture compiles the workflow (failing the test with every
diagnostic if it does not compile) and compares each artifact, as readable text in a
snapshot file of its own, with syrupy: plan.json, step_config.json, the machine's
transition table, and the checklists' ordering with the dependencies and notes behind
it. The source's hash is left out, so an edit of comments or layout changes nothing.
Every artifact is compared before the test fails, and the failure shows each changed
artifact's whole diff; `pytest --snapshot-update` writes them. Installed as a `pytest11`
entry point, so no conftest is needed. See docs/testing.md.

`todoflow_paths` covers the machine's behaviour, not only its artifacts:

    @todoflow_paths("flows/release.todoflow")
    def test_release_paths(todoflow_path):
        ...

parametrizes the test over the paths through each step's machine (`compiler.paths`),
and walks each through the real engine with synthetic replies (`runtime.agents.walk`) before
the test's body runs, failing the test at the first engine invariant that does not hold.
"""

from __future__ import annotations

import difflib
import json
import sys
import tempfile
from collections.abc import Callable, Generator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

if TYPE_CHECKING:
    from todoflow.compiler.paths import FlowPaths, StepPath
    from todoflow.runtime.agents.walk import Walk
    from todoflow.runtime.definition import RunDefinition

SnapshotWorkflow = Callable[[str | Path], None]

# artifact -> the suffix of its snapshot file
ARTIFACTS = {"plan.json": "json", "step_config.json": "json", "machine": "md", "ordering": "txt"}
_NO_SYRUPY = (
    "todoflow_snapshot compares artifacts with syrupy's `snapshot` fixture, which this test "
    "session does not have: pip install syrupy (and do not disable its plugin)"
)


@pytest.fixture
def todoflow_snapshot(request: pytest.FixtureRequest) -> SnapshotWorkflow:
    """Compile a `.todoflow` file and assert its artifacts match the snapshots."""
    from todoflow.api import Compiled
    from todoflow.compiler.analysis import analyze_file

    snapshot = _syrupy_snapshot(request)
    if snapshot is None:  # failing outside the lookup's `except` keeps the message alone
        pytest.fail(_NO_SYRUPY, pytrace=False)
    root = request.config.rootpath

    def check(path: str | Path) -> None:
        file = _beside(Path(path), request.path.parent, root)
        shown = file.resolve().relative_to(root) if file.resolve().is_relative_to(root) else file
        compiled = Compiled(analyze_file(file, shown.as_posix()))
        if not compiled.ok:
            pytest.fail(f"{shown} does not compile:\n" + _render(compiled), pytrace=False)
        changed = [
            difference
            for name, text in artifacts(compiled).items()
            if (difference := _compare(snapshot, name, text)) is not None
        ]
        if changed:
            count = f"{len(changed)} artifact{'s differ' if len(changed) > 1 else ' differs'}"
            head = f"{shown}: {count} from the snapshots (`pytest --snapshot-update` takes the new ones)"
            pytest.fail("\n\n".join([head, *changed]), pytrace=False)

    return check


def _beside(path: Path, *folders: Path) -> Path:
    """A workflow named in a test, found where the test is: a relative path against the
    test file's folder, then the rootdir (not the working folder, which depends on where
    pytest was started); the first folder's when it is in neither, so the error names it."""
    if path.is_absolute():
        return path
    return next((folder / path for folder in folders if (folder / path).exists()), folders[0] / path)


def _syrupy_snapshot(request: pytest.FixtureRequest) -> Any:
    try:
        return request.getfixturevalue("snapshot")
    except pytest.FixtureLookupError:
        return None


def artifacts(compiled: Any) -> dict[str, str]:
    """Each pinned artifact as the text its snapshot holds."""
    from todoflow.compiler.diagrams import markdown

    return {
        "plan.json": _without_hash(compiled.artifacts.file("plan.json")),
        "step_config.json": _without_hash(compiled.artifacts.file("step_config.json")),
        "machine": markdown(compiled.artifacts.machine),
        "ordering": ordering(compiled),
    }


def _without_hash(text: str) -> str:
    """The file without `source_sha256`: the hash changes with every comment."""
    data = json.loads(text)
    data.pop("source_sha256", None)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def ordering(compiled: Any) -> str:
    """Every ready checklist in its final order, each task with what it comes after and
    its constraints, then the notes of the tasks the dependencies moved."""
    lines = []
    for step in compiled.workflow.all_steps():
        if step.tasks is None:
            continue
        lines.append(f"{step.id}: {len(step.tasks)} task{'s' if len(step.tasks) != 1 else ''}")
        for task in step.tasks:
            label = f"{task.label}: " if task.label else ""
            lines.append(f"  {task.position}. {label}{_line(task.action)} => {_line(task.expected_result)}")
            if task.after:
                lines.append(f"       after {', '.join(task.after)}")
            lines += [f"       constraint: {_line(c)}" for c in task.constraints]
    notes = [d.message for d in compiled.diagnostics if d.code == "N0301"]
    if notes:
        lines += ["", "notes:", *(f"  {note}" for note in notes)]
    return "\n".join(lines or ["no ready checklist: every orchestrator composes its own"]) + "\n"


def _line(text: str) -> str:
    return " ".join(text.split())


def _compare(snapshot: Any, name: str, text: str) -> str | None:
    """None when the artifact matches its snapshot (or the run writes snapshots), else
    what to show: the whole diff, or that there is no snapshot yet."""
    assertion = snapshot.use_extension(_extension(ARTIFACTS[name]))
    if assertion(name=name.removesuffix(".json")) == text:  # recorded by syrupy; never raises
        return None
    stored = assertion.extension.read
    if stored is None:
        return f"{name}: no snapshot yet"
    diff = difflib.unified_diff(
        stored.splitlines(keepends=True),
        text.splitlines(keepends=True),
        f"{name} (snapshot)",
        f"{name} (compiled now)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in diff).rstrip("\n")


@cache
def _extension(suffix: str) -> type[Any]:
    """A syrupy extension writing one text file per artifact, remembering what it read."""
    from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

    class ArtifactSnapshot(SingleFileSnapshotExtension):
        _write_mode = WriteMode.TEXT
        file_extension = suffix
        read: str | None = None

        def read_snapshot_data_from_location(
            self, *, snapshot_location: str, snapshot_name: str, session_id: str
        ) -> Any:
            self.read = super().read_snapshot_data_from_location(
                snapshot_location=snapshot_location, snapshot_name=snapshot_name, session_id=session_id
            )
            return self.read

    ArtifactSnapshot.__name__ = ArtifactSnapshot.__qualname__ = f"ArtifactSnapshot_{suffix}"
    return ArtifactSnapshot


def _render(compiled: Any) -> str:
    from todoflow.dsl.diagnostics import render_all

    return render_all(compiled.diagnostics, compiled.sources)


# -- the machine's paths, walked through the engine ------------------------------------


class PathCase:
    """One path of a flow's machine, as a test's `todoflow_path`; or why the flow has none."""

    def __init__(
        self, flow: Path, case_id: str, problem: str | None = None, walks: _Walks | None = None
    ) -> None:
        self.flow, self.id, self.problem, self.walks = flow, case_id, problem, walks
        self._walk: Walk | None = None

    def __repr__(self) -> str:
        return f"<todoflow path {self.id} of {self.flow}>"

    @property
    def events(self) -> list[str]:
        """The path's events in words (`intake`, `confirm 1`, ...), its own step's only."""
        return [] if self.walks is None else [event.label for event in self.walks.path.events]

    def walk(self) -> Walk:
        """The path walked through the engine (once; the plugin does it before the test's
        body): fails the test at the first invariant that does not hold."""
        from todoflow.runtime.agents.walk import InvariantBroken, walk

        if self._walk is not None:
            return self._walk
        if self.walks is None:
            pytest.fail(self.problem or f"{self.flow} has no paths", pytrace=False)
        definition, paths, path = self.walks
        with tempfile.TemporaryDirectory(prefix="todoflow-path-") as workspace:
            try:
                self._walk = walk(definition, paths, path, Path(workspace))
                return self._walk
            except InvariantBroken as broken:
                problem = str(broken)
        events = ", ".join(self.events)  # failed outside the handler: no chained traceback
        pytest.fail(f"{self.flow}: {problem}\nthe path in step `{path.step_id}`: {events}", pytrace=False)


class _Walks(NamedTuple):
    """What walking one path takes: the flow's definition (read once per flow), its paths."""

    definition: RunDefinition
    paths: FlowPaths
    path: StepPath


def todoflow_paths(*flows: str | Path, max_revisions: int = 1, step: str | None = None) -> Any:
    """Parametrize a test over the paths of each flow's machine (`todoflow paths`), as the
    argument `todoflow_path`; each is walked through the engine before the test's body.
    `step`: one step's paths only; `max_revisions`: the revise teleports a path takes."""
    here = Path(sys._getframe(1).f_globals.get("__file__", "x")).resolve().parent  # the test module's
    found = [(_beside(Path(flow), here, Path.cwd()), Path(flow)) for flow in flows]  # read, and shown
    several = len(flows) > 1
    cases = [case for flow, shown in found for case in _path_cases(flow, shown, several, max_revisions, step)]
    return pytest.mark.parametrize("todoflow_path", cases, ids=[case.id for case in cases])


def _path_cases(
    flow: Path, shown: Path, several: bool, max_revisions: int, step: str | None
) -> list[PathCase]:
    """The paths of `flow`, named in failures as the test names it (`shown`)."""
    from todoflow.compiler.analysis import analyze_file
    from todoflow.compiler.machine import workflow_machine
    from todoflow.compiler.paths import flow_paths
    from todoflow.dsl.diagnostics import has_errors, render_all
    from todoflow.runtime.definition import read_definition

    prefix = f"{flow.stem}:" if several else ""
    try:
        analysis = analyze_file(flow, str(shown))
    except OSError as error:
        return [PathCase(shown, f"{prefix}no-paths", f"cannot read {shown}: {error.strerror or error}")]
    workflow = analysis.workflow
    definition = None if workflow is None else read_definition(flow).definition  # once per flow
    if workflow is None or definition is None or has_errors(analysis.diagnostics):
        problem = f"{shown} does not compile:\n" + render_all(analysis.diagnostics, analysis.sources)
        return [PathCase(shown, f"{prefix}no-paths", problem)]
    paths = flow_paths(workflow, workflow_machine(workflow), max_revisions)
    graphs = [g for g in paths.graphs if step is None or g.step_id == step]
    if not graphs:
        known = ", ".join(g.step_id for g in paths.graphs)
        return [
            PathCase(
                shown, f"{prefix}no-paths", f"{shown}: no step `{step}` runs; the steps that run: {known}"
            )
        ]
    return [
        PathCase(shown, prefix + path.id, walks=_Walks(definition, paths, path))
        for graph in graphs
        for path in graph.paths
    ]


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """A test parametrized by `todoflow_paths` walks its path first."""
    case = pyfuncitem.funcargs.get("todoflow_path")
    if isinstance(case, PathCase):
        case.walk()
    return (yield)
