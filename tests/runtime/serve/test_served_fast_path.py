"""learn_code under `todoflow serve` (runtime.handoff): the server runs the step's
main.py, and its delegations reach the MCP client as directives to answer; the engine
keeps the step the script's; `fastPathOnly` on the MCP start makes a missing or failing
script an error with no fallback; a server that stops fails the attempt it ran."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime.serve import handoff
from todoflow.runtime.serve.service import ServeError, TodoService, Workflows

from ...conftest import ROOT
from ...support.runtime_helpers import read_journal

EXAMPLE = ROOT / "examples" / "fast-path.todoflow"
MAIN = ROOT / "examples" / "learnings" / "convert-all" / "main.py"
EXPORTS = "abc"


def _service(tmp_path: Path, script: str | None, peers: bool = False) -> TodoService:
    flows, learnings, workspace = tmp_path / "flows", tmp_path / "learnings", tmp_path / "workspace"
    for folder in (flows, workspace):
        folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE, flows)
    if script is not None:
        (learnings / "convert-all").mkdir(parents=True, exist_ok=True)
        (learnings / "convert-all" / "main.py").write_text(script)
    return TodoService(Workflows([flows]), tmp_path / "runs", workspace, learnings, peers=peers)


def _start(service: TodoService, **prepare: Any) -> dict[str, Any]:
    prepared = service.prepare("convert", "none", None, None, **prepare)
    return service.execute(prepared["startAttemptId"])


def converted(workspace: Path, directive: dict[str, Any], done: int) -> dict[str, str]:
    """The client's sub-agent at the script's delegation `done` (from 0): the export it
    names converted in `workspace`; its answer."""
    name = EXPORTS[done]
    assert f"exports/{name}.json" in directive["delegation"]["instructions_to_sub_agent"]
    (workspace / "csv").mkdir(exist_ok=True)
    (workspace / "csv" / f"{name}.csv").write_text(f"id,name\n{done + 1},{name}\n")
    (workspace / "converted.log").write_text("".join(f"{n}\n" for n in EXPORTS[: done + 1]))
    return {"evidence": f"csv/{name}.csv has 1 row", "progress_execution_outcome": f"{name} converted"}


def _convert(service: TodoService, directive: dict[str, Any], done: int) -> dict[str, Any]:
    reply = converted(service.workspace, directive, done)
    return service.step(directive["processId"], directive["attemptId"], reply)


def _types(tmp_path: Path, process_id: str) -> list[tuple[str, str]]:
    return [(e["type"], e["by"]) for e in read_journal(tmp_path / "runs" / process_id)]


def test_the_scripts_delegations_are_the_clients_to_answer(tmp_path: Path) -> None:
    service = _service(tmp_path, MAIN.read_text())
    directive = _start(service)
    process_id = directive["processId"]
    for done in range(3):
        assert directive["node"] == "delegated" and directive["fastPath"] == "running", directive
        assert f"exports/{EXPORTS[done]}.json" in directive["delegation"]["instructions_to_sub_agent"]
        directive = _convert(service, directive, done)
    assert directive["completed"] is True and "fastPath" not in directive
    service.close()
    types = _types(tmp_path, process_id)
    assert types[:2] == [("submit_tasks", "caller"), ("fast_path_started", "driver")]
    assert [t for t in types if t[0] == "delegate"] == [("delegate", "script")] * 3
    assert [t for t in types if t[0] == "sub_agent_done"] == [("sub_agent_done", "agent")] * 3
    assert "fast_path_failed" not in dict(types)
    learned = (tmp_path / "learnings" / "converter" / "learnings.jsonl").read_text().splitlines()
    assert len(learned) == 3  # each validated delegation learned from, as the orchestrator's are


def test_the_client_cannot_take_a_learn_code_step_from_its_script(tmp_path: Path) -> None:
    service = _service(tmp_path, MAIN.read_text())
    directive = _start(service)
    decision = {
        "next_action": "delegate",
        "selected_route_id": "convert",
        "todo_id_to_execute": "todo_1",
        "instructions_to_sub_agent": "Convert it.",
    }
    with pytest.raises(ServeError, match="nothing changed"):  # at the script's delegation
        service.step(directive["processId"], directive["attemptId"], decision)
    directive = _convert(service, directive, 0)
    assert directive["node"] == "delegated"  # the script's next, not an orchestrator turn
    service.close()


SLOW = textwrap.dedent(
    """\
    import time
    time.sleep(60)
    """
)


def test_a_busy_script_is_waited_for_within_bounds_and_a_stopping_server_fails_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handoff, "WAIT", 0.5)
    service = _service(tmp_path, SLOW)
    directive = _start(service)
    assert directive["fastPath"] == "running" and "still working" in directive["note"]
    assert directive["node"] == "work"  # no delegation yet: the script is busy
    decision = {"next_action": "continue", "selection_reasoning": "mine now"}
    with pytest.raises(ServeError, match="orchestrated by its learn_code script"):
        service.step(directive["processId"], directive["attemptId"], decision)
    service.close()  # stops the script; the attempt is journaled as failed, the step afresh
    (failed,) = [e for e in read_journal(tmp_path / "runs" / directive["processId"]) if "reason" in e]
    assert failed["type"] == "fast_path_failed" and "shutting down" in failed["reason"]
    again = _service(tmp_path, SLOW)
    status = again.status(directive["processId"])
    assert status["directive"]["node"] == "intake" and "fastPath" not in status["directive"]
    again.close()


@pytest.mark.parametrize("peers", [False, True], ids=["one process", "one of several workers"])
def test_fast_path_only_a_script_failing_while_no_call_waits_is_the_error_of_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, peers: bool
) -> None:
    monkeypatch.setattr(handoff, "WAIT", 0.2)
    service = _service(tmp_path, "import sys, time\ntime.sleep(1)\nsys.exit(3)\n", peers)
    directive = _start(service, fast_path_only=True)
    assert directive["fastPath"] == "running" and "still working" in directive["note"]
    process_id = directive["processId"]
    handoff_ = service.handoffs.get(process_id)
    assert handoff_ is not None
    handoff_.wait(30)  # the script fails while no call waits for it
    with pytest.raises(ServeError, match="fast_path_only: the fast path of step `convert-all` failed"):
        service.status(process_id)
    service.close()
    assert [t for t, _ in _types(tmp_path, process_id)].count("fast_path_started") == 1  # not run again


def test_fast_path_only_on_the_mcp_start_has_no_fallback(tmp_path: Path) -> None:
    service = _service(tmp_path, None)
    with pytest.raises(ServeError, match=r"fast_path_only: no main\.py") as raised:
        _start(service, fast_path_only=True)
    process_id = str(raised.value).split("run `")[1].split("`")[0]
    journaled = len(read_journal(tmp_path / "runs" / process_id))
    with pytest.raises(ServeError, match=r"fast_path_only: no main\.py"):  # still no script
        service.status(process_id)
    assert len(read_journal(tmp_path / "runs" / process_id)) == journaled  # asking wrote nothing
    (tmp_path / "learnings" / "convert-all").mkdir(parents=True)
    shutil.copy(MAIN, tmp_path / "learnings" / "convert-all" / "main.py")
    directive = service.status(process_id)["directive"]
    for done in range(3):
        assert directive["node"] == "delegated", directive
        directive = _convert(service, directive, done)
    assert directive["completed"] is True
    service.close()
    types = [t for t, _ in _types(tmp_path, process_id)]
    assert "delegate" in types and ("continue", "agent") not in _types(tmp_path, process_id)
    with pytest.raises(ServeError, match="fastPathOnly: true or false"):
        service.prepare("convert", "none", None, None, fast_path_only="yes")
