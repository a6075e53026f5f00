"""Crash safety: a run killed with SIGKILL at any point, then resumed, ends exactly as an
uninterrupted run: no confirmation lost, none applied twice, the same events and todos."""

from __future__ import annotations

import json
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ...conftest import ROOT
from ...support import kill_loop
from ...support.runtime_helpers import read_journal

FLOW = """\
workflow crash "Crash test" {
    todo_task work "Work" {
        description "Walk a checklist."
        output "out.txt"
        expect file "out.txt"
    }
    regular wrap "Wrap up" {
        description "Write the summary."
    }
}
"""
REPLIES = """\
replies:
  - tasks:
      - {action: "one", expected_result: "one is done"}
      - {action: "two", expected_result: "two is done"}
      - {action: "three", expected_result: "three is done"}
    progress_checklist_outcome: "three tasks"
  - {evidence: "did one", progress_execution_outcome: "one ok"}
  - {teleportTo: teleport-revise-tasks}
  - tasks:
      - {action: "one", expected_result: "one is done"}
      - {action: "two, better", expected_result: "two is done"}
    resume_from_task: 2
    progress_checklist_outcome: "two tasks now"
    progress_execution_outcome: "one stays done"
  - {evidence: "did two", progress_execution_outcome: "two ok", files: {out.txt: "done"}}
  - {evidence: "summary written", progress_execution_outcome: "wrapped"}
"""
pytestmark = pytest.mark.slow
MODES = ("before", "partial", "after")


def _cli(folder: Path, *args: str, crash: tuple[int, str] | None = None) -> subprocess.CompletedProcess[str]:
    child = kill_loop.start(folder, list(args), crash)
    out, err = child.communicate(timeout=120)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


ORCHESTRATED = (
    ROOT / "examples" / "orchestrated.todoflow",
    ROOT / "examples" / "replies" / "orchestrated.yaml",
)


def _setup(folder: Path, scenario: tuple[str, str] | None = None) -> None:
    flow, replies = scenario or (FLOW, REPLIES)
    folder.mkdir(parents=True)
    (folder / "flow.todoflow").write_text(flow)
    (folder / "replies.yaml").write_text(replies)


def _normalized(folder: Path) -> dict[str, Any]:
    (run,) = (folder / ".todoflow" / "runs").iterdir()
    stamps = {"at", "created_at", "updated_at", "process_id"}

    def clean(value: Any) -> Any:
        if isinstance(value, dict):  # a learning's id names its process: keep its journal entry
            named = {k: v.rsplit(":", 1)[-1] if k == "learning_id" else v for k, v in value.items()}
            return {k: clean(v) for k, v in named.items() if k not in stamps}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    events = [clean(json.loads(line)) for line in (run / "events.jsonl").read_text().splitlines()]
    todos = {p.name: clean(json.loads(p.read_text())) for p in sorted((run / "todos").iterdir())}
    learned = {  # a learning's id names its process: the journal entry after the colon stays
        p.parent.name: [
            clean(record) | {"id": record["id"].rsplit(":", 1)[-1]}
            for record in map(json.loads, p.read_text().splitlines())
        ]
        for p in sorted((folder / "learnings").glob("*/learnings.jsonl"))
    }
    return {"journal": clean(read_journal(run)), "events": events, "todos": todos, "learnings": learned}


def _run_with_crash(
    base: Path, point: int, mode: str, scenario: tuple[str, str] | None = None
) -> tuple[str, dict[str, Any] | None]:
    folder = base / f"{point}-{mode}"
    _setup(folder, scenario)
    first = _cli(folder, "run", "flow.todoflow", "--agent", "scripted:replies.yaml", crash=(point, mode))
    if first.returncode == 0:
        return "finished", None  # the run had fewer operations than `point`
    assert first.returncode == -9, first.stderr
    (run,) = (folder / ".todoflow" / "runs").iterdir()
    resumed = _cli(folder, "run", "--resume", run.name, "--agent", "scripted:replies.yaml")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return "crashed", _normalized(folder)


def test_killed_at_any_point_and_resumed_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    reference_folder = tmp_path / "reference"
    _setup(reference_folder)
    done = _cli(reference_folder, "run", "flow.todoflow", "--agent", "scripted:replies.yaml")
    assert done.returncode == 0, done.stderr
    reference = _normalized(reference_folder)
    assert [e["type"] for e in reference["journal"]] == [
        "submit_tasks",
        "confirm",
        "teleport",
        "revise",
        "confirm",
        "confirm",
    ]
    points = [(point, mode) for point in range(1, 30) for mode in MODES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda pm: (pm, _run_with_crash(tmp_path, *pm)), points))
    crashed = [(pm, result) for pm, (status, result) in outcomes if status == "crashed"]
    # every journal write and fsync (two per entry), and the derived files' writes, in every mode
    assert len(crashed) >= len(MODES) * 2 * len(reference["journal"])
    for (point, mode), result in crashed:
        assert result == reference, f"crash at operation {point} ({mode})"


def test_an_orchestrated_run_killed_at_any_point_loses_nothing_and_learns_exactly_once(
    tmp_path: Path,
) -> None:
    """Delegations, a failed prevalidation, learnings, a created todo and the generic agent:
    a SIGKILL at any store operation (learnings' writes included), then a resume, gives the
    uninterrupted run's journal, events, todos and learnings, each learning written once."""
    scenario = (ORCHESTRATED[0].read_text(), ORCHESTRATED[1].read_text())
    reference_folder = tmp_path / "reference"
    _setup(reference_folder, scenario)
    done = _cli(reference_folder, "run", "flow.todoflow", "--agent", "scripted:replies.yaml")
    assert done.returncode == 0, done.stderr
    reference = _normalized(reference_folder)
    assert [len(records) for records in reference["learnings"].values()] == [1, 1]
    points = [(point, mode) for point in range(1, 60) for mode in MODES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda pm: (pm, _run_with_crash(tmp_path, *pm, scenario)), points))
    crashed = [(pm, result) for pm, (status, result) in outcomes if status == "crashed"]
    assert len(crashed) >= len(MODES) * 2 * len(reference["journal"])
    for (point, mode), result in crashed:
        assert result == reference, f"crash at operation {point} ({mode})"


def _verified(folder: Path) -> list[str]:
    """What the run's derived files lack against its journal (the verifier, reading only)."""
    from todoflow.runtime import process

    (run,) = (folder / ".todoflow" / "runs").iterdir()
    with process.open_process(run.parent, run.name)[0] as engine:
        assert engine.directive().completed
        return engine.gaps()


def _killed_twice(base: Path, case: tuple[int, str, int, str]) -> tuple[str, list[str], dict[str, Any]]:
    """An orchestrated run killed at a random operation, its resume killed at another,
    then resumed to the end: what the verifier finds, and the run as files."""
    first, first_mode, second, second_mode = case
    folder = base / "-".join(map(str, case))
    scenario = (ORCHESTRATED[0].read_text(), ORCHESTRATED[1].read_text())
    _setup(folder, scenario)
    agent = ("--agent", "scripted:replies.yaml")
    ran = _cli(folder, "run", "flow.todoflow", *agent, crash=(first, first_mode))
    if ran.returncode == 0:
        return "finished", _verified(folder), _normalized(folder)
    assert ran.returncode == -9, ran.stderr
    (run,) = (folder / ".todoflow" / "runs").iterdir()
    again = _cli(folder, "run", "--resume", run.name, *agent, crash=(second, second_mode))
    if again.returncode != 0:
        assert again.returncode == -9, again.stderr
        last = _cli(folder, "run", "--resume", run.name, *agent)
        assert last.returncode == 0, last.stdout + last.stderr
    return "crashed", _verified(folder), _normalized(folder)


def test_runs_killed_at_random_points_end_with_derived_files_that_match_their_journal(tmp_path: Path) -> None:
    """Issue 21 item 3: SIGKILLs at random store operations (the run, then its resume),
    in every mode; every completed run's events, todos and learnings match its journal,
    as the verifier reads them, and equal the uninterrupted run's."""
    scenario = (ORCHESTRATED[0].read_text(), ORCHESTRATED[1].read_text())
    reference_folder = tmp_path / "reference"
    _setup(reference_folder, scenario)
    assert _cli(reference_folder, "run", "flow.todoflow", "--agent", "scripted:replies.yaml").returncode == 0
    reference = _normalized(reference_folder)
    chance = random.Random(21)  # the run has 26 store operations; its resumes fewer
    cases = [
        (chance.randint(1, 26), chance.choice(MODES), chance.randint(1, 26), chance.choice(MODES))
        for _ in range(16)
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda case: (case, _killed_twice(tmp_path, case)), cases))
    assert all(status == "crashed" for _, (status, _, _) in outcomes)
    for case, (_, gaps, result) in outcomes:
        assert gaps == [], f"killed at {case}"
        assert result == reference, f"killed at {case}"


def _full_disk(base: Path, point: int) -> tuple[list[str], str, list[str], dict[str, Any]]:
    """An orchestrated run whose disk fills at its `point`-th store operation and that
    finishes anyway (its journal allocated ahead): what the verifier finds then, what
    `status` says, and after a resume with space again, the verifier and the files."""
    folder = base / f"full-{point}"
    _setup(folder, (ORCHESTRATED[0].read_text(), ORCHESTRATED[1].read_text()))
    agent = ("--agent", "scripted:replies.yaml")
    ran = _cli(folder, "run", "flow.todoflow", *agent, crash=(point, "full"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    before = _verified(folder)
    (run,) = (folder / ".todoflow" / "runs").iterdir()
    shown = _cli(folder, "status", run.name)
    assert shown.returncode == 0, shown.stderr
    resumed = _cli(folder, "run", "--resume", run.name, *agent)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return before, shown.stderr, _verified(folder), _normalized(folder)


def test_a_run_that_fills_the_disk_says_what_it_lacks_and_is_made_whole_when_resumed(tmp_path: Path) -> None:
    """Issue 21 item 3: a full disk from any operation on (the journal still takes its
    lines): the run completes, the verifier and `status` say what its derived files lack
    (a run completes lacking its learnings and todos, as the attack run found), and a
    resume with space again makes them equal the uninterrupted run's."""
    scenario = (ORCHESTRATED[0].read_text(), ORCHESTRATED[1].read_text())
    reference_folder = tmp_path / "reference"
    _setup(reference_folder, scenario)
    assert _cli(reference_folder, "run", "flow.todoflow", "--agent", "scripted:replies.yaml").returncode == 0
    reference = _normalized(reference_folder)
    points = [1, 3, 6, 10, 15, 20, 24]  # of the 26 operations of the run
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda point: (point, _full_disk(tmp_path, point)), points))
    for point, (before, said, after, result) in outcomes:
        assert before, f"disk full at operation {point}: the verifier found nothing missing"
        assert "its files derived from the journal are behind it" in said, point
        assert after == [], f"disk full at operation {point}"
        assert result == reference, f"disk full at operation {point}"


FAST_PATH = (
    ROOT / "examples" / "fast-path.todoflow",
    ROOT / "examples" / "learnings" / "convert-all" / "main.py",
)
CONVERTED = "replies:\n" + (  # the sub-agent's answer to any delegation, however many attempts
    '  - {files: {converted.log: "done\\n"}, evidence: "converted", progress_execution_outcome: "ok"}\n' * 12
)


def _scripts_of(folder: Path) -> list[int]:
    """The processes running a script of `folder`'s learnings."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(folder / "learnings").encode() in command:
            found.append(int(proc.name))
    return found


def _learn_code_killed(base: Path, case: tuple[int, str]) -> tuple[str, list[str], list[int]]:
    """A fast_path_only learn_code run killed at a store operation (its script left
    running), then resumed to the end: the verifier's finding and the scripts still running."""
    folder = base / f"fast-{case[0]}-{case[1]}"
    _setup(folder, (FAST_PATH[0].read_text(), CONVERTED))
    (folder / "learnings" / "convert-all").mkdir(parents=True)
    (folder / "learnings" / "convert-all" / "main.py").write_text(FAST_PATH[1].read_text())
    agent = ("--agent", "scripted:replies.yaml", "--fast-path-only")
    ran = _cli(folder, "run", "flow.todoflow", *agent, crash=case)
    status = "finished" if ran.returncode == 0 else "crashed"
    if status == "crashed":
        assert ran.returncode == -9, ran.stderr
        (run,) = (folder / ".todoflow" / "runs").iterdir()
        resumed = _cli(folder, "run", "--resume", run.name, *agent)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return status, _verified(folder), _scripts_of(folder)


def test_learn_code_runs_killed_at_any_point_leave_no_script_and_derived_files_that_match(
    tmp_path: Path,
) -> None:
    """Issue 21 items 3 and 4: a learn_code run killed at a store operation while its
    script runs, then resumed: the resume kills what is left of the script's group, tries
    the script afresh, and the completed run's derived files match its journal."""
    cases = [(point, mode) for point in range(1, 16, 2) for mode in ("partial", "after")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda case: (case, _learn_code_killed(tmp_path, case)), cases))
    assert sum(status == "crashed" for _, (status, _, _) in outcomes) >= len(cases) // 2
    for case, (_, gaps, scripts) in outcomes:
        assert gaps == [], f"killed at {case}"
        assert scripts == [], f"killed at {case}: a script outlived its attempt"
