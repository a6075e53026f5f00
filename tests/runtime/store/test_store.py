"""The run folder's promises: reading writes nothing, old journals load, two writers
lose nothing, a damaged run is refused (never restarted), a full disk after the sync
still means the step happened, and memory stays bounded over many runs."""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import todoflow
from todoflow.runtime import process
from todoflow.runtime.plan import RunPlan
from todoflow.runtime.store import base as store_base
from todoflow.runtime.store import folder as store_module
from todoflow.runtime.store.base import DamagedRun, StoreError

from ...conftest import FIXTURES, run_cli
from ...support.runtime_helpers import (
    CHECKLIST,
    confirm,
    events,
    folder_digest,
    intake,
    read_journal,
    start,
    walk,
)

OLD_RUN = FIXTURES / "runs" / "v1-journal"
OLD_ID = "w-20261201-000000-abcdef"
TWO_STEPS = 'workflow w "W" {\n  todo_task t "T" {\n  }\n  regular r "R" {\n  }\n}\n'


def _old_run(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / OLD_ID
    shutil.copytree(OLD_RUN, folder)
    return folder


def _run_with_entries(tmp_path: Path) -> Path:
    engine, store = start(tmp_path, TWO_STEPS)
    list(walk(engine, [intake("a", "b", "c"), confirm(1)]))
    engine.close()
    return store.folder


# -- old journals ----------------------------------------------------------------------


def test_a_journal_written_before_entries_were_typed_still_loads(tmp_path: Path) -> None:
    folder = _old_run(tmp_path)
    before = folder_digest(folder)
    engine, _ = process.open_process(tmp_path / "runs", OLD_ID)
    directive = engine.directive()
    assert (directive.state.step_id, directive.role, directive.state.seq) == ("ship", "Task 2/2", 9)
    assert directive.state.progress.results == ("outcome 4", "Pending")
    assert engine.repair() is False  # today's derivation gives the events and todos it holds
    assert folder_digest(folder) == before
    engine.step(directive.attempt_id, confirm(5))
    engine.close()
    journal = read_journal(folder)
    assert journal[0]["outcome"] == "outcome 0"  # old lines stay as they were written
    assert journal[-1]["progress_execution_outcome"] == "outcome 5"
    assert [e["seq"] for e in events(folder)][-1] == 10


# -- reading writes nothing ---------------------------------------------------------------


def test_status_resume_and_mcp_status_write_nothing(tmp_path: Path) -> None:
    from todoflow.runtime.serve.service import TodoService, Workflows

    folder = _run_with_entries(tmp_path)
    run_dir = tmp_path / "runs"
    before = folder_digest(run_dir)
    assert run_cli("status", "--run-dir", str(run_dir)).returncode == 0
    assert run_cli("status", "p-1", "--run-dir", str(run_dir), "--json").returncode == 0
    with todoflow.resume("p-1", run_dir=run_dir) as engine:
        assert engine.directive().role == "Task 2/3"
    service = TodoService(Workflows([]), run_dir, tmp_path)
    assert service.status(None)["runs"][0]["processId"] == "p-1"
    assert service.status("p-1")["directive"]["role"] == "Task 2/3"
    service.close()
    assert folder_digest(run_dir) == before
    assert (folder / "todos" / "t.json").exists()


def test_opening_a_run_to_look_at_it_opens_no_file_for_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_entries(tmp_path)
    opened: list[tuple[str, int]] = []
    real = os.open

    def spy(path: Any, flags: int, *args: Any) -> int:
        opened.append((str(path), flags))
        return real(path, flags, *args)

    monkeypatch.setattr(store_module.os, "open", spy)
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    assert engine.directive().role == "Task 2/3"
    engine.close()
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    assert opened and not [path for path, flags in opened if flags & writing]


def test_templates_are_read_when_a_prompt_first_needs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_entries(tmp_path)
    read: list[str] = []
    real = Path.read_text

    def spy(self: Path, *args: Any, **kwargs: Any) -> str:
        read.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", spy)
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    directive = engine.directive()
    assert not [name for name in read if name.endswith(".j2")]
    assert "Task 2/3" in directive.prompt()  # an orchestrator turn: three templates
    assert [name for name in read if name.endswith(".j2")] == [
        "orchestrator_system.j2",
        "orchestrator_user.j2",
        "work.j2",
    ]
    engine.close()


# -- two writers -------------------------------------------------------------------------


def test_two_programs_stepping_one_run_keep_each_others_events(tmp_path: Path) -> None:
    """A steps 1, B steps 2 and 3, A steps 4: events.jsonl holds all four, whichever
    store flushes first (a flush checked only that its first entry followed the file)."""
    a, store_a = start(tmp_path, CHECKLIST)
    b, _ = process.open_process(tmp_path / "runs", "p-1")
    a.step(a.directive().attempt_id, intake("w", "x", "y", "z"))
    b.step(b.directive().attempt_id, confirm(1))
    b.step(b.directive().attempt_id, confirm(2))
    a.step(a.directive().attempt_id, confirm(3))
    a.close()
    b.close()
    reference, store_r = start(tmp_path / "alone", CHECKLIST)
    list(walk(reference, [intake("w", "x", "y", "z"), confirm(1), confirm(2), confirm(3)]))
    reference.close()

    def kept(folder: Path) -> list[tuple[str, int]]:
        return [(e["event"], e["seq"]) for e in events(folder)]

    assert kept(store_a.folder) == kept(store_r.folder)
    assert {e["seq"] for e in events(store_a.folder)} == {1, 2, 3, 4}


def test_repair_rebuilds_events_missing_inside_the_file(tmp_path: Path) -> None:
    folder = _run_with_entries(tmp_path)
    path = folder / "events.jsonl"
    whole = path.read_bytes()
    kept = [line for line in whole.splitlines(keepends=True) if json.loads(line)["seq"] != 1]
    path.write_bytes(b"".join(kept))  # the end is right; entry 1's events are gone
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    assert engine.repair() is True
    assert path.read_bytes() == whole
    engine.close()


# -- damaged runs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("delete", "journal.jsonl is missing"),
        ("empty", "events.jsonl records entries up to 2"),
        ("zero", "events.jsonl records entries up to 2"),
        ("garble", "line 1 of journal.jsonl after entry 0 is not an entry"),
    ],
)
def test_a_damaged_journal_is_refused_and_nothing_is_overwritten(
    tmp_path: Path, damage: str, problem: str
) -> None:
    folder = _run_with_entries(tmp_path)
    journal = folder / "journal.jsonl"
    if damage == "delete":
        journal.unlink()
    elif damage == "empty":
        journal.write_bytes(b"")
    elif damage == "zero":
        journal.write_bytes(b"\0" * journal.stat().st_size)
    else:
        data = journal.read_bytes()
        journal.write_bytes(b"{not json}\n" + data[data.index(b"\n") + 1 :])
    before = folder_digest(folder)
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    with pytest.raises(DamagedRun, match=problem):
        engine.directive()
    engine.close()
    run_dir = str(tmp_path / "runs")
    resumed = run_cli("run", "--resume", "p-1", "--run-dir", run_dir, "--agent", "scripted:none.yaml")
    assert resumed.returncode == 1
    assert "is damaged" in resumed.stderr and "Traceback" not in resumed.stderr
    listing = run_cli("status", "--run-dir", run_dir)
    assert listing.returncode == 0 and "damaged" in listing.stdout
    assert folder_digest(folder) == before


def test_a_journal_cut_before_its_snapshot_is_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_base, "SNAPSHOT_EVERY", 2)
    folder = _run_with_entries(tmp_path)
    assert (folder / "snapshot.json").exists()
    data = (folder / "journal.jsonl").read_bytes()
    (folder / "journal.jsonl").write_bytes(data[:10])
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    with pytest.raises(DamagedRun, match="ends before the entry its snapshot was taken at"):
        engine.directive()
    engine.close()


def test_a_snapshot_is_renamed_into_no_files_place_and_a_run_without_one_opens_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_base, "SNAPSHOT_EVERY", 2)
    replaced: list[bool] = []
    write = store_module.write_atomically

    def recorded(path: Path, text: str, spare: Path | None = None) -> None:
        if path.name == "snapshot.json":
            replaced.append(path.exists())
        write(path, text, spare)

    monkeypatch.setattr(store_module, "write_atomically", recorded)
    engine, store = start(tmp_path, TWO_STEPS)
    list(walk(engine, [intake("a", "b", "c"), confirm(1), confirm(2), confirm(3)]))
    engine.close()
    folder = store.folder
    assert len(replaced) >= 2 and not any(replaced)  # the old one removed first: no rename over a file
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    state = engine.directive().state
    engine.close()
    (folder / "snapshot.json").unlink()  # as a reader finds it between the removal and the rename
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    assert engine.directive().state == state
    engine.close()


def test_a_torn_last_line_is_still_mended_silently(tmp_path: Path) -> None:
    folder = _run_with_entries(tmp_path)
    journal = folder / "journal.jsonl"
    data = bytearray(journal.read_bytes())
    end = data.index(b"\0")
    data[end : end + 20] = b'{"seq":3,"at":"2026-'  # a step that never returned
    journal.write_bytes(bytes(data))
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    directive = engine.directive()
    assert directive.state.seq == 2
    engine.step(directive.attempt_id, confirm(2))
    engine.close()
    assert [e["seq"] for e in read_journal(folder)] == [1, 2, 3]


# -- a full disk ---------------------------------------------------------------------------


def test_a_full_disk_after_the_sync_still_returns_the_next_directive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engine, store = start(tmp_path, TWO_STEPS)
    list(walk(engine, [intake("a")]))
    real = store_module.write_atomically

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module, "write_atomically", full)
    with caplog.at_level(logging.WARNING, logger="todoflow.store"):
        directive = engine.step(engine.directive().attempt_id, confirm(1))  # completes step t
    assert directive.state.step_id == "r"  # the step happened
    assert "No space left on device" in caplog.text
    monkeypatch.setattr(store_module, "write_atomically", real)
    engine.step(directive.attempt_id, confirm(2))  # the next step repairs what was missed
    engine.close()
    reference, fresh = start(tmp_path / "alone", TWO_STEPS)
    list(walk(reference, [intake("a"), confirm(1), confirm(2)]))
    reference.close()
    assert events(store.folder) == events(fresh.folder)
    assert (store.folder / "todos" / "t.json").read_text() == (fresh.folder / "todos" / "t.json").read_text()


def test_a_full_disk_before_the_journal_write_is_a_clear_error_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "CHUNK", 64)  # the first entry outgrows the allocated journal
    engine, store = start(tmp_path, CHECKLIST)
    directive = engine.directive()

    def full(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module.os, "posix_fallocate", full)
    before = folder_digest(store.folder)
    with pytest.raises(StoreError, match="no space left for the journal"):
        engine.step(directive.attempt_id, intake("a"))
    assert folder_digest(store.folder) == before
    monkeypatch.undo()
    assert engine.directive().attempt_id == directive.attempt_id
    engine.close()


def test_a_run_folder_that_cannot_be_made_whole_is_not_left_half_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module, "sync_tree", full)
    with pytest.raises(StoreError, match="cannot create the run folder"):
        todoflow.start(CHECKLIST, run_dir=tmp_path / "runs")
    assert list((tmp_path / "runs").iterdir()) == []


# -- bounded memory ------------------------------------------------------------------------


def test_opening_two_thousand_runs_keeps_no_plan_alive(tmp_path: Path) -> None:
    template = _run_with_entries(tmp_path / "one")
    journal = (template / "journal.jsonl").read_bytes().rstrip(b"\0")  # its written part
    runs = tmp_path / "runs"
    for n in range(2000):
        folder = runs / f"p-{n}"
        shutil.copytree(template, folder, ignore=shutil.ignore_patterns("journal.jsonl", "prompts"))
        (folder / "journal.jsonl").write_bytes(journal)
    gc.collect()
    before = _plans_alive()  # other tests in this worker may hold theirs
    for n in range(2000):
        with process.open_process(runs, f"p-{n}")[0] as engine:
            assert engine.directive().role == "Task 2/3"
    gc.collect()
    alive = _plans_alive() - before
    assert alive < 10, f"{alive} plans are still referenced after their runs were closed"


def _plans_alive() -> int:
    return sum(1 for thing in gc.get_objects() if type(thing) is RunPlan)


# -- resuming at any distance from a snapshot -----------------------------------------------

READY_FLOW = 'workflow w "W" {\n  todo_task t "T" {\n    tasks {\n%s    }\n  }\n}\n'


def test_a_resume_replays_at_most_a_snapshots_worth_of_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_base, "SNAPSHOT_BYTES", 2048)
    lines = "".join(f'      "Task {n}" => "Task {n} is checked"\n' for n in range(100))
    engine, store = start(tmp_path, READY_FLOW % lines)
    directive = engine.directive()
    directive = engine.step(directive.attempt_id, directive.ready_reply() or {}, by="caller")
    taken = set()
    for n in range(99):
        directive = engine.step(directive.attempt_id, confirm(n))
        path = store.folder / "snapshot.json"
        offset, size = (
            (json.loads(path.read_bytes())["offset"], path.stat().st_size) if path.exists() else (0, 0)
        )
        taken.add(offset)
        written = (store.folder / "journal.jsonl").read_bytes().rstrip(b"\0")
        longest = max(len(line) + 1 for line in written.splitlines())
        assert len(written) - offset < max(size, 2048) + longest  # what opening the run replays
    assert len(taken) >= 3  # a snapshot every few kilobytes of journal, not every 1,000 entries
    state = directive.state
    engine.close()
    reopened, _ = process.open_process(tmp_path / "runs", "p-1")
    assert reopened.directive().state == state
    reopened.close()


def test_a_snapshot_names_the_ready_checklist_rather_than_copying_it(tmp_path: Path) -> None:
    lines = "".join(f'      "Task {n}" => "Task {n} is checked"\n' for n in range(100))
    engine, store = start(tmp_path, READY_FLOW % lines)
    directive = engine.directive()
    directive = engine.step(directive.attempt_id, directive.ready_reply() or {}, by="caller")
    for n in range(60):
        directive = engine.step(directive.attempt_id, confirm(n))
    engine.close()
    snapshot = json.loads((store.folder / "snapshot.json").read_text(encoding="utf-8"))
    assert snapshot["state"]["ready"] is True and "tasks" not in snapshot["state"]
    reopened, reopened_store = process.open_process(tmp_path / "runs", "p-1")
    state = reopened.directive().state
    assert state == directive.state and state.tasks is reopened_store.plan.step("t").ready_tasks
    reopened.close()


# -- the plan, built once per process ---------------------------------------------------------


def test_opening_a_run_again_takes_its_plan_as_built_until_a_plan_file_changes(tmp_path: Path) -> None:
    folder = _run_with_entries(tmp_path)
    meta = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert len(meta["plan_sha256"]) == 64
    first = process.open_process(tmp_path / "runs", "p-1")[1].plan
    assert process.open_process(tmp_path / "runs", "p-1")[1].plan is first
    stored = folder / "plan" / "plan.json"
    plan = json.loads(stored.read_text(encoding="utf-8"))
    plan["steps"][0]["title"] = "T, retitled"
    stored.write_text(json.dumps(plan), encoding="utf-8")
    again = process.open_process(tmp_path / "runs", "p-1")[1].plan
    assert again is not first and again.step("t").title == "T, retitled"
