"""A run's derived files (events.jsonl, todos/, learnings) against its journal: the
verifier that finds what they lack, the readers that say so and write nothing, and the
next writer that rebuilds them (issue 21 item 3)."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

import todoflow
from todoflow.runtime import process
from todoflow.runtime.serve.service import TodoService, Workflows
from todoflow.runtime.store import folder as folder_module

from ...conftest import ROOT, run_cli
from ...support.runtime_helpers import folder_digest

ORCHESTRATED = ROOT / "examples" / "orchestrated.todoflow"
REPLIES = ROOT / "examples" / "replies" / "orchestrated.yaml"


def _finished_run(tmp_path: Path) -> Path:
    """An orchestrated run, complete, its learnings recorded: its run folder."""
    (tmp_path / "flow.todoflow").write_text(ORCHESTRATED.read_text())
    done = run_cli("run", "flow.todoflow", "--agent", f"scripted:{REPLIES}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    return run


def _gaps(run: Path) -> list[str]:
    with process.open_process(run.parent, run.name)[0] as engine:
        return engine.gaps()


def test_the_verifier_finds_what_derived_files_lack_and_the_readers_say_so_writing_nothing(
    tmp_path: Path,
) -> None:
    run = _finished_run(tmp_path)
    assert _gaps(run) == []
    events = (run / "events.jsonl").read_bytes().splitlines(keepends=True)
    journal = (run / "journal.jsonl").read_bytes().split(b"\0")[0].splitlines()
    (run / "events.jsonl").write_bytes(b"".join(events[: len(events) // 2]))
    (todos,) = (run / "todos").glob("*.json")
    todos.unlink()
    (one, *_) = sorted((tmp_path / "learnings").glob("*/learnings.jsonl"))
    one.unlink()
    before = folder_digest(run)
    gaps = _gaps(run)
    assert len(gaps) == 3, gaps
    assert gaps[0].startswith("events.jsonl holds the events of ")
    assert gaps[0].endswith(f" of the journal's {len(journal)} entries")
    assert gaps[1] == f"todos/{todos.name} is missing"
    assert gaps[2].startswith("1 of the run's 2 learnings are missing from ")
    for command in (["status", run.name], ["log", run.name], ["report", run.name, "-o", "-"]):
        shown = run_cli(*command, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert f"note: run {run.name}: its files derived from the journal are behind it" in shown.stderr
        assert "`todoflow run --resume " in shown.stderr
    listed = run_cli("learnings", "list", cwd=tmp_path)
    assert f"note: run {run.name}: its files derived from the journal are behind it" in listed.stderr
    assert "1 of the run's 2 learnings are missing" in listed.stderr
    page = run_cli("report", run.name, "-o", "-", cwd=tmp_path).stdout
    assert "Learnings (1)" in page and "The journal proves learnings the folder does not hold" in page
    assert folder_digest(run) == before  # reading wrote nothing
    assert not one.exists()
    resumed = run_cli("run", "--resume", run.name, "--agent", f"scripted:{REPLIES}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _gaps(run) == []
    assert one.exists()


def _cut(run: Path) -> Path:
    """A crash's leftovers in a finished run: events.jsonl cut in half, a completed step's
    todos gone, one learnings file gone (returned); the journal whole."""
    events = (run / "events.jsonl").read_bytes().splitlines(keepends=True)
    (run / "events.jsonl").write_bytes(b"".join(events[: len(events) // 2]))
    for todos in (run / "todos").glob("*.json"):
        todos.unlink()
    (one, *_) = sorted((run.parent.parent.parent / "learnings").glob("*/learnings.jsonl"))
    one.unlink()
    return one


def test_resuming_a_complete_run_from_python_repairs_its_derived_files_at_once(tmp_path: Path) -> None:
    """A complete run gets no next step: `todoflow.resume` repairs when it opens it."""
    run = _finished_run(tmp_path)
    learning = _cut(run)
    with todoflow.resume(run.name, run_dir=run.parent) as engine:
        assert engine.directive().completed
    assert _gaps(run) == []
    assert learning.exists()


def test_resuming_repairs_events_cut_at_a_line_inside_the_last_entrys_events(tmp_path: Path) -> None:
    """The quick look at the end of events.jsonl sees a batch cut at a line boundary too."""
    run = _finished_run(tmp_path)
    whole = (run / "events.jsonl").read_bytes()
    (run / "events.jsonl").write_bytes(whole[: whole.rfind(b"\n", 0, -1) + 1])
    assert _gaps(run) != []
    with todoflow.resume(run.name, run_dir=run.parent):
        pass
    assert (run / "events.jsonl").read_bytes() == whole


def test_opening_a_run_to_drive_it_writes_nothing_when_its_derived_files_are_current(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)
    before = folder_digest(run), folder_digest(tmp_path / "learnings")
    with todoflow.resume(run.name, run_dir=run.parent) as engine:
        assert engine.repair() is False
    assert (folder_digest(run), folder_digest(tmp_path / "learnings")) == before


def test_serve_repairs_a_run_it_opens_for_a_call(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)
    learning = _cut(run)
    service = TodoService(Workflows([]), run.parent, tmp_path)
    try:
        assert service.status(run.name)["status"] == "complete"
    finally:
        service.close()
    assert _gaps(run) == []
    assert learning.exists()


def test_run_resume_writes_back_a_learning_missing_behind_events_that_are_whole(tmp_path: Path) -> None:
    """The note says `run --resume` rebuilds what is missing: a learnings file removed
    while events.jsonl is whole is written again too."""
    run = _finished_run(tmp_path)
    (one, *_) = sorted((tmp_path / "learnings").glob("*/learnings.jsonl"))
    one.unlink()
    assert _gaps(run) != []
    resumed = run_cli("run", "--resume", run.name, "--agent", f"scripted:{REPLIES}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _gaps(run) == []
    assert one.exists()


def test_a_repair_on_a_full_disk_is_logged_and_the_run_still_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run = _finished_run(tmp_path)
    _cut(run)

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(folder_module, "write_atomically", full)
    with (
        caplog.at_level(logging.WARNING, "todoflow.store"),
        todoflow.resume(run.name, run_dir=run.parent) as engine,
    ):
        assert engine.directive().completed
    assert "derived files not written (No space left on device)" in caplog.text
    monkeypatch.undo()
    assert len(_gaps(run)) == 3
