"""A command's start in the journal (`CommandStarted`): journaled as it starts, with its
secrets redacted, read back as written, shown by the log and the audit, and open until
a `run_command` call is journaled after it."""

from __future__ import annotations

import os
from pathlib import Path

from todoflow.runtime.agents import process_groups
from todoflow.runtime.agents.commands import Journal, left_running
from todoflow.runtime.entries import CommandStarted, entry_from_json, keep, to_json
from todoflow.runtime.llm_choice import ToolUse
from todoflow.runtime.views.log import log_json, log_text

from ...support.runtime_helpers import CHECKLIST, confirm, events, intake, read_journal, start

SECRET = "sk-commands-0123456789-echoed"


def test_a_command_start_is_journaled_at_once_and_the_turn_answers_after_it(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    directive = engine.step(engine.directive().attempt_id, intake("build"))
    journal = Journal(engine)
    journal.asking(directive)
    keep(SECRET)
    journal.started(f"make KEY={SECRET}", os.getpid())
    assert journal.attempt != directive.attempt_id  # the journal moved on
    (started,) = [e for e in store.entries() if isinstance(e, CommandStarted)]
    assert left_running(store.entries()) == [started]
    call = ToolUse("orchestrator", "run_command", "todo_1", "0" * 64, 20, 10, 5, False, {"exit_code": 0})
    engine.step(journal.attempt, confirm(1), usage=(call,))  # the turn's answer is accepted
    assert left_running(store.entries()) == []  # its call was journaled: it ended
    engine.close()
    assert (started.agent, started.todo, started.command) == ("orchestrator", "todo_1", "make KEY=[redacted]")
    assert (started.runner, started.group) == (process_groups.this_runner(), os.getpid())
    assert started.leader == process_groups.leader(os.getpid())
    line = next(line for line in read_journal(tmp_path / "runs" / "p-1") if line["type"] == "command_started")
    assert entry_from_json(line) == started and to_json(started) == line
    assert SECRET not in (tmp_path / "runs" / "p-1" / "journal.jsonl").read_text()
    (event,) = [e for e in events(tmp_path / "runs" / "p-1") if e["event"] == "CommandStarted"]
    assert event["command"] == "make KEY=[redacted]" and event["group"] == os.getpid()
    log = log_json(store.plan, store.process_id, store.started_at, store.entries())
    (iteration,) = log["steps"][0]["iterations"][1:]
    assert iteration["commands_started"] == [
        {"at": started.at, "agent": "orchestrator", "todo": "todo_1", "command": "make KEY=[redacted]"}
    ]
    assert "   command: orchestrator started `make KEY=[redacted]` for todo_1\n" in log_text(log)
