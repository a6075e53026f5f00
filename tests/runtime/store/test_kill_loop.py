"""The kill loop's small version (tests/support/kill_loop.py, issue 21): a few SIGKILLs
of orchestrated and learn_code runs and two full-disk runs, each run verified from its
journal; and the verifier finding what it is there to find, so it cannot rot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ...support import kill_loop

pytestmark = pytest.mark.slow


def test_runs_killed_at_random_points_and_on_a_full_disk_end_whole(tmp_path: Path) -> None:
    tally = kill_loop.loop(kill_loop.Options(kills=4, full_disk=2, seed=5, workers=2, scratch=tmp_path))
    assert [case.problems for case in tally.failed] == []
    assert tally.killed() >= 4
    assert set(tally.runs) == {"orchestrated", "learn_code"}
    assert tally.full_disk == 2
    assert tally.lacked >= 1  # todoflow.resume made a run whole that finished lacking derived files


def test_the_verifier_finds_cut_events_a_doubled_learning_other_confirmations_and_a_live_script(
    tmp_path: Path,
) -> None:
    (orchestrated, _) = kill_loop.scenarios()
    expected = kill_loop.reference(tmp_path, orchestrated).confirmations
    run = kill_loop.run_folder(tmp_path / "reference-orchestrated")
    assert run is not None
    assert kill_loop.verify(run, expected) == []
    assert kill_loop.verify(run, expected[:-1]) == [
        "its journal's confirmations differ from the uninterrupted run's (lost or doubled)"
    ]
    (learnings, *_) = sorted((tmp_path / "reference-orchestrated" / "learnings").glob("*/learnings.jsonl"))
    line = learnings.read_text()
    learnings.write_text(line + line)
    events = (run / "events.jsonl").read_bytes()
    (run / "events.jsonl").write_bytes(events[: events.rfind(b"\n", 0, -1) + 1])
    script = subprocess.Popen(["sleep", "60"], cwd=run)
    try:
        found = kill_loop.verify(run, expected)
    finally:
        script.kill()
        script.wait()
    assert found[0].startswith("events.jsonl holds the events of ")
    assert found[1].startswith("learning ") and found[1].endswith(" is written 2 times")
    assert found[2].startswith(f"a script outlived its attempt: pid {script.pid} ")
    assert len(found) == 3, found
