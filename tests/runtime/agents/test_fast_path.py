"""learn_code, the fast path: main.py orchestrates a step through call_sub_agent on a
loopback endpoint, with no orchestrator model; any failure starts the step afresh with
the orchestrator; fast_path_only makes failure final (issue 14)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime import process
from todoflow.runtime.agents import fast_path
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine, Refusal
from todoflow.runtime.entries import FastPathFailed, FastPathStarted
from todoflow.runtime.llm_choice import LlmChoices
from todoflow.runtime.plan import Llm

from ...conftest import ROOT, run_cli, wait_until
from ...support.fake_model import FakeModel
from ...support.runtime_helpers import alive, read_journal

EXAMPLE = ROOT / "examples" / "fast-path.todoflow"
REPLIES = ROOT / "examples" / "replies" / "fast-path.yaml"
MAIN = ROOT / "examples" / "learnings" / "convert-all" / "main.py"


def _run(
    tmp_path: Path, script: str | None, source: str | None = None, llms: Any = None, only: bool = False
) -> tuple[Engine, Path]:
    """A run of the example (or `source`) whose learnings folder holds `script` as main.py."""
    learnings = tmp_path / "learnings"
    if script is not None:
        (learnings / "convert-all").mkdir(parents=True)
        (learnings / "convert-all" / "main.py").write_text(script)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    text = source or EXAMPLE.read_text()
    definition = from_source(text, "fast-path.todoflow").or_raise()
    engine = process.start(
        definition,
        tmp_path / "runs",
        workspace=workspace,
        learnings=learnings,
        llms=llms,
        process_id="p-1",
        fast_path_only=only,
    )
    return engine, workspace


def _answers() -> list[dict[str, Any]]:
    import yaml

    return list(yaml.safe_load(REPLIES.read_text())["replies"])


def test_the_example_runs_by_its_script_with_no_orchestrator_reply(tmp_path: Path) -> None:
    engine, workspace = _run(tmp_path, MAIN.read_text())
    out = io.StringIO()
    assert drive(engine, ScriptedAgent(_answers(), workspace), out) == "complete"
    engine.close()
    journal = read_journal(tmp_path / "runs" / "p-1")
    assert [(e["type"], e["by"]) for e in journal] == [
        ("submit_tasks", "caller"),
        ("fast_path_started", "driver"),
        *[("delegate", "script"), ("sub_agent_done", "agent")] * 3,
    ]
    assert journal[1]["script_sha256"] == hashlib.sha256(MAIN.read_bytes()).hexdigest()
    assert (tmp_path / "learnings" / "convert-all" / "main.py").read_text() == MAIN.read_text()  # read-only
    assert len((tmp_path / "learnings" / "converter" / "learnings.jsonl").read_text().splitlines()) == 3
    assert "the step completed by the fast path, with no orchestrator model" in out.getvalue()


def test_the_fast_path_spends_no_orchestrator_model_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from todoflow.runtime.agents.llm import LlmAgent
    from todoflow.runtime.agents.llm_config import LlmConfig, Provider

    engine, workspace = _run(tmp_path, MAIN.read_text(), llms=LlmChoices(None, Llm("fake", "m")))

    def convert(name: str) -> Any:
        def answer(request: dict[str, Any]) -> dict[str, Any]:
            (workspace / "converted.log").write_text(name)
            return {
                "tool": "complete_todo",
                "arguments": {"result": f"{name} converted", "evidence": f"csv/{name}.csv"},
            }

        return answer

    monkeypatch.setenv("FAKE_KEY", "k")
    with FakeModel([convert(n) for n in "abc"]) as fake:
        config = LlmConfig(
            {"fake": Provider("fake", fake.url, "FAKE_KEY")}, LlmChoices(None, Llm("fake", "m"))
        )
        assert drive(engine, LlmAgent(config), io.StringIO()) == "complete"
    engine.close()
    assert len(fake.requests) == 3 and fake.unused() == 0
    for request in fake.requests:  # every call a sub-agent's: its own conversation, its tools
        tools = [t["function"]["name"] for t in request["body"]["tools"]]
        assert tools == ["complete_todo", "update_todo", "report_failure"]
        assert request["body"]["messages"][0]["role"] == "user"  # no orchestrator system prompt
    calls = [e for e in read_journal(tmp_path / "runs" / "p-1") if e["type"] == "llm_call"]
    assert {c["agent"] for c in calls} == {"convert"}


FAILS_AFTER_ONE = textwrap.dedent(
    """\
    import json, os, sys, urllib.request
    url = os.environ["MCP_API_URL"] + "/tools/custom/call_sub_agent"
    body = {"route_id": "convert", "todo_id": "todo_1", "instructions": "Convert a."}
    headers = {"Authorization": "Bearer " + os.environ["MCP_API_TOKEN"]}
    urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers)).read()
    sys.exit(3)
    """
)


def test_a_failing_script_falls_back_to_the_orchestrator_afresh(tmp_path: Path) -> None:
    engine, workspace = _run(tmp_path, FAILS_AFTER_ONE)
    answers = _answers()
    orchestrator = [  # after the fresh start: the orchestrator does the three todos itself
        {"files": {"converted.log": "a\nb\nc\n"}, "evidence": f"did {n}", "progress_execution_outcome": n}
        for n in "abc"
    ]
    out = io.StringIO()
    assert drive(engine, ScriptedAgent([answers[0], *orchestrator], workspace), out) == "complete"
    engine.close()
    types = [e["type"] for e in read_journal(tmp_path / "runs" / "p-1")]
    assert types == [
        "submit_tasks",
        "fast_path_started",
        "delegate",
        "sub_agent_done",
        "fast_path_failed",
        "submit_tasks",  # the step afresh: nothing of the attempt carried over
        "confirm",
        "confirm",
        "confirm",
    ]
    assert "main.py exited with 3" in out.getvalue()
    log = json.loads(run_cli("log", "p-1", "--run-dir", str(tmp_path / "runs"), "--json").stdout)
    attempt, afresh = log["steps"]  # the attempt, then the step afresh: never mixed
    digest = hashlib.sha256(FAILS_AFTER_ONE.encode()).hexdigest()
    assert [(i["iteration"], i["action"]) for i in attempt["iterations"]] == [
        (0, "submit_tasks"),
        (1, "fast_path"),
    ]
    tried = attempt["iterations"][1]
    assert tried["fast_path"] == {"script_sha256": digest, "failed": "main.py exited with 3"}
    assert tried["agent"] == "script" and len(tried["delegations"]) == 1
    assert tried["delegations"][0]["todo_id"] == "todo_1" and tried["delegations"][0]["result"] == "done"
    assert [i["action"] for i in afresh["iterations"]] == ["submit_tasks", "confirm", "confirm", "confirm"]
    assert afresh["completed"] and not attempt["completed"]
    text = run_cli("log", "p-1", "--run-dir", str(tmp_path / "runs")).stdout
    assert "(todo_task, fast path failed)" in text and "-- iteration 1: fast path, main.py" in text
    assert "   script: delegate -> convert [todo_1: Convert exports/a.json]" in text
    assert "   fast path failed: main.py exited with 3; the step starts afresh" in text


TELLS_WHAT_IT_GOT = textwrap.dedent(
    """\
    import json, os, sys, urllib.request
    url = os.environ["MCP_API_URL"] + "/tools/custom/call_sub_agent"
    body = {"route_id": "convert", "todo_id": "todo_1", "instructions": "Convert a."}
    headers = {"Authorization": "Bearer " + os.environ["MCP_API_TOKEN"]}
    with urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers)) as answer:
        open("answer.json", "w").write(json.dumps({"status": answer.status, **json.load(answer)}))
    sys.exit(3)
    """
)


def test_a_sub_agent_that_gives_up_is_an_answer_to_the_script_and_the_run_stops_resumably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LLM sub-agent of a script's delegation stops (its answers refused until it
    stops): the script gets HTTP 200 with `gave_up`, its attempt fails, the step starts
    afresh, and the run stops where docs/llm.md says (the model's refusals), resumable;
    what the model spent is journaled, and the log keeps the attempt apart."""
    from todoflow.runtime.agents.llm import MAX_REFUSALS, LlmAgent
    from todoflow.runtime.agents.llm_config import LlmConfig, Provider

    engine, workspace = _run(tmp_path, TELLS_WHAT_IT_GOT, llms=LlmChoices(None, Llm("fake", "m")))
    monkeypatch.setenv("FAKE_KEY", "k")
    out = io.StringIO()
    with FakeModel([{"text": "I cannot do this."}] * (MAX_REFUSALS + 1)) as fake:
        config = LlmConfig(
            {"fake": Provider("fake", fake.url, "FAKE_KEY")}, LlmChoices(None, Llm("fake", "m"))
        )
        assert drive(engine, LlmAgent(config), out) == "stopped"
    engine.close()
    answer = json.loads((workspace / "answer.json").read_text())
    assert answer == {
        "status": 200,
        "todo_id": "todo_1",
        "route_id": "convert",
        "passed": False,
        "reason": "the sub-agent gave no answer: "
        f"the model's answers were refused {MAX_REFUSALS + 1} times in a row",
        "next": "Sub-agent convert · Task 1/3",
        "gave_up": True,
    }
    types = [e["type"] for e in read_journal(tmp_path / "runs" / "p-1")]
    assert types == [
        "submit_tasks",
        "fast_path_started",
        "delegate",
        *["llm_call"] * (MAX_REFUSALS + 1),
        "fast_path_failed",
        "submit_tasks",
    ]
    assert (
        "learn_code failed (main.py exited with 3); the orchestrator starts the step afresh" in out.getvalue()
    )
    log = json.loads(run_cli("log", "p-1", "--run-dir", str(tmp_path / "runs"), "--json").stdout)
    (delegation,) = log["steps"][0]["iterations"][1]["delegations"]
    assert len(delegation["llm_calls"]) == MAX_REFUSALS + 1 and delegation["agent"] == "convert"


def test_fast_path_only_makes_a_missing_or_failing_script_an_error(tmp_path: Path) -> None:
    for name, script in (("missing", None), ("failing", FAILS_AFTER_ONE)):
        folder = tmp_path / name
        folder.mkdir()
        engine, workspace = _run(folder, script)
        with pytest.raises(fast_path.FastPathError, match="fast_path_only"):
            drive(engine, ScriptedAgent(_answers(), workspace), io.StringIO(), fast_path_only=True)
        engine.close()


def test_the_engine_keeps_a_fast_path_only_step_from_any_orchestrator(tmp_path: Path) -> None:
    engine, workspace = _run(tmp_path, FAILS_AFTER_ONE, only=True)
    with pytest.raises(fast_path.FastPathError, match="exited with 3"):
        drive(engine, ScriptedAgent(_answers(), workspace), io.StringIO(), fast_path_only=True)
    intake = engine.directive()
    tasks = [{"action": t.action, "expected_result": t.expected_result} for t in intake.ready_tasks or ()]
    with pytest.raises(Refusal, match="the run is fast_path_only: step `convert-all` is orchestrated by"):
        engine.step(intake.attempt_id, {"tasks": tasks, "progress_checklist_outcome": "mine"})
    engine.close()


def test_a_fast_path_only_run_resumed_tries_its_fixed_script_again(tmp_path: Path) -> None:
    engine, workspace = _run(tmp_path, FAILS_AFTER_ONE)
    with pytest.raises(fast_path.FastPathError, match="exited with 3"):
        drive(engine, ScriptedAgent(_answers(), workspace), io.StringIO(), fast_path_only=True)
    engine.close()
    shutil.copy(MAIN, tmp_path / "learnings" / "convert-all" / "main.py")  # fixed
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    replies = [_answers()[0], *_answers()]  # a script resumes after the replies the run has used
    out = io.StringIO()
    assert drive(engine, ScriptedAgent(replies, workspace), out, fast_path_only=True) == "complete"
    engine.close()
    types = [e["type"] for e in read_journal(tmp_path / "runs" / "p-1")]
    assert types.count("fast_path_started") == 2 and types.count("fast_path_failed") == 1
    assert "confirm" not in types  # no orchestrator ever did a todo itself


def _started_by(engine: Engine, runner: str | None) -> None:
    """The journal of a fast path that `runner` started and that is still running."""
    intake = engine.directive()
    tasks = [{"action": t.action, "expected_result": t.expected_result} for t in intake.ready_tasks or ()]
    reply = {"tasks": tasks, "progress_checklist_outcome": "the ready checklist"}
    directive = engine.step(intake.attempt_id, reply, "caller")
    engine.journal(
        directive.attempt_id,
        lambda seq, at: FastPathStarted(
            seq=seq, at=at, by="driver", step="convert-all", script_sha256="0" * 64, runner=runner
        ),
    )


def test_a_fast_path_whose_runner_ended_is_failed_when_resumed_and_a_live_one_is_left_alone(
    tmp_path: Path,
) -> None:
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    host = socket.gethostname()
    for name, runner in (("dead", f"{host}:{int(ended.stdout)}"), ("older", None), ("live", f"{host}:1")):
        folder = tmp_path / name
        folder.mkdir()
        engine, workspace = _run(folder, MAIN.read_text())
        _started_by(engine, runner)
        out = io.StringIO()
        if name == "live":  # pid 1 lives: another process runs it, and the run is not taken from it
            with pytest.raises(fast_path.FastPathError, match="running in another process"):
                drive(engine, ScriptedAgent(_answers(), workspace), out)
            assert engine.directive().state.fast_path == "running"
            engine.close()
            continue
        assert drive(engine, ScriptedAgent(_answers(), workspace), out) == "complete"
        engine.close()
        types = [e["type"] for e in read_journal(folder / "runs" / "p-1")]
        assert types[:4] == ["submit_tasks", "fast_path_started", "fast_path_failed", "submit_tasks"]
        assert types.count("fast_path_started") == 1  # failed, not run again: the orchestrator took over


def test_the_command_line_fast_path_only_and_a_missing_script(tmp_path: Path) -> None:
    args = [
        "--agent",
        f"scripted:{REPLIES}",
        "--workspace",
        str(tmp_path),
        "--learnings",
        str(tmp_path / "none"),
    ]
    only = run_cli("run", str(EXAMPLE), *args, "--fast-path-only", cwd=tmp_path)
    assert only.returncode == 1 and "fast_path_only: no main.py for step `convert-all`" in only.stderr
    shutil.copytree(MAIN.parent.parent, tmp_path / "learnings")
    ok = [
        "--agent",
        f"scripted:{REPLIES}",
        "--workspace",
        str(tmp_path),
        "--learnings",
        str(tmp_path / "learnings"),
    ]
    assert run_cli("run", str(EXAMPLE), *ok, "--fast-path-only", cwd=tmp_path).returncode == 0


PROBE = textwrap.dedent(
    """\
    import json, os, urllib.request, urllib.error
    url = os.environ["MCP_API_URL"] + "/tools/custom/call_sub_agent"
    TOKEN = os.environ["MCP_API_TOKEN"]
    def post(body, token):
        headers = {"Authorization": "Bearer " + token} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers)) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)
    results = {
        "no token": post({"route_id": "convert", "todo_id": "todo_1", "instructions": "x"}, None),
        "wrong token": post({"route_id": "convert", "todo_id": "todo_1", "instructions": "x"}, "nope"),
        "unknown route": post({"route_id": "teleport", "todo_id": "todo_1", "instructions": "x"}, TOKEN),
        "bad body": post({"route_id": "convert"}, TOKEN),
        "wrong todo": post({"route_id": "convert", "todo_id": "todo_3", "instructions": "x"}, TOKEN),
    }
    open("probe.json", "w").write(json.dumps(results))
    raise SystemExit(1)
    """
)


def test_the_endpoint_refuses_what_it_should(tmp_path: Path) -> None:
    engine, workspace = _run(tmp_path, PROBE)
    answers = [{"files": {"converted.log": "x"}, "evidence": "e", "progress_execution_outcome": "o"}] * 3
    drive(engine, ScriptedAgent(answers, workspace), io.StringIO())
    engine.close()
    results = json.loads((workspace / "probe.json").read_text())
    assert results["no token"][0] == results["wrong token"][0] == 401
    assert (
        results["unknown route"][0] == 404
        and "has no route `teleport`" in results["unknown route"][1]["error"]
    )
    assert results["bad body"][0] == 400
    assert (
        results["wrong todo"][0] == 409 and "the current todo is todo_1" in results["wrong todo"][1]["error"]
    )


SLEEPS = textwrap.dedent(
    """\
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open("child.pid", "w").write(str(child.pid))
    time.sleep(60)
    """
)


def test_a_script_past_its_time_is_stopped_with_everything_it_started(tmp_path: Path) -> None:

    engine, workspace = _run(tmp_path, SLEEPS)
    definition_step = engine.plan.steps[0]
    directive = engine.directive()
    checklist = {
        "tasks": [
            {"action": t.action, "expected_result": t.expected_result} for t in directive.ready_tasks or ()
        ],
        "progress_checklist_outcome": "ready",
    }
    engine.step(directive.attempt_id, checklist, "caller")
    out = io.StringIO()  # the limit leaves the script time to start its child, on a busy machine too
    assert fast_path.run(engine, definition_step, lambda e, d: d, out, timeout=5.0) is False
    assert "main.py ran longer than 5 s and was stopped" in out.getvalue()
    child = int((workspace / "child.pid").read_text())

    def gone() -> bool:  # with the script's process group (reaped by whoever adopts it)
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except FileNotFoundError:
            return True
        return "\tZ" in status.split("State:")[1].split("\n")[0]

    wait_until(gone, f"the script's child {child} to be stopped with the script")
    engine.close()


def test_only_a_learn_code_step_with_a_route_tries_the_fast_path(tmp_path: Path) -> None:
    without_mode = EXAMPLE.read_text().replace("        mode learn_code\n", "")
    engine, workspace = _run(tmp_path, MAIN.read_text(), without_mode)
    orchestrator = [
        {"files": {"converted.log": "x"}, "evidence": f"did {n}", "progress_execution_outcome": n}
        for n in "abc"
    ]
    assert drive(engine, ScriptedAgent(orchestrator, workspace), io.StringIO()) == "complete"
    engine.close()
    assert "fast_path_started" not in [e["type"] for e in read_journal(tmp_path / "runs" / "p-1")]


FORKS = textwrap.dedent(
    """\
    import json, os, subprocess, sys, time, urllib.request
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open("pids.json", "w") as handle:
        json.dump({"script": os.getpid(), "grandchild": grandchild.pid, "env": sorted(os.environ)}, handle)
    if os.environ.get("TODOFLOW_STEP_ID") and os.path.exists("hang"):
        time.sleep(300)
    url = os.environ["MCP_API_URL"] + "/tools/custom/call_sub_agent"
    headers = {"Authorization": "Bearer " + os.environ["MCP_API_TOKEN"]}
    for n, name in enumerate("abc", start=1):
        body = {"route_id": "convert", "todo_id": f"todo_{n}", "instructions": f"Convert {name}."}
        urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers)).read()
    """
)


def test_nothing_a_successful_script_started_outlives_its_attempt_and_it_gets_a_clean_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("TODOFLOW_STORE", "postgresql://u:pw@host/db")
    engine, workspace = _run(tmp_path, FORKS)
    assert drive(engine, ScriptedAgent(_answers(), workspace), io.StringIO()) == "complete"
    engine.close()
    pids = json.loads((workspace / "pids.json").read_text())
    wait_until(lambda: not alive(pids["grandchild"]), "the script's child to be killed", within=5)
    kept = {name for name in ("PATH", "HOME", "LANG") if name in os.environ}
    assert set(pids["env"]) - {"LC_CTYPE"} == kept | {"MCP_API_URL", "MCP_API_TOKEN", "TODOFLOW_STEP_ID"}
    (started,) = [e for e in read_journal(tmp_path / "runs" / "p-1") if e["type"] == "fast_path_started"]
    assert started["group"] == pids["script"]


def test_a_resumed_run_kills_what_is_left_of_a_killed_runners_script(tmp_path: Path) -> None:
    learnings = tmp_path / "learnings"
    (learnings / "convert-all").mkdir(parents=True)
    (learnings / "convert-all" / "main.py").write_text(FORKS)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "hang").write_text("")  # the script starts its child, then never ends
    command = [sys.executable, "-m", "todoflow", "run", str(EXAMPLE), "--agent", f"scripted:{REPLIES}"]
    command += [
        "--workspace",
        str(workspace),
        "--learnings",
        str(learnings),
        "--run-dir",
        str(tmp_path / "runs"),
    ]
    runner = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until((workspace / "pids.json").exists, "the script to start its child")
        wait_until(lambda: _journaled(tmp_path / "runs", "fast_path_started"), "the start to be journaled")
    finally:
        runner.kill()
        runner.wait()
    pids = json.loads((workspace / "pids.json").read_text())
    assert alive(pids["script"]) and alive(pids["grandchild"])  # a killed runner leaves them running
    (workspace / "hang").unlink()
    engine, _ = process.open_process(tmp_path / "runs", _runs(tmp_path)[0])
    orchestrator = [
        {"files": {"converted.log": "a\nb\nc\n"}, "evidence": f"did {n}", "progress_execution_outcome": n}
        for n in "abc"
    ]
    assert (
        drive(engine, ScriptedAgent([_answers()[0], *orchestrator], workspace), io.StringIO()) == "complete"
    )
    engine.close()

    def gone() -> bool:
        return not (alive(pids["script"]) or alive(pids["grandchild"]))

    wait_until(gone, "the killed runner's script and its child to be killed", within=5)


def _runs(tmp_path: Path) -> list[str]:
    return [p.name for p in (tmp_path / "runs").iterdir()]


def _journaled(runs: Path, kind: str) -> bool:
    """Whether a run under `runs` has journaled an entry of `kind`."""
    return any(f'"type":"{kind}"'.encode() in p.read_bytes() for p in runs.glob("*/journal.jsonl"))


HANGS_UP = textwrap.dedent(
    """\
    import os, socket, struct, time, urllib.parse
    url = urllib.parse.urlparse(os.environ["MCP_API_URL"])
    client = socket.create_connection((url.hostname, url.port))
    head = (
        "POST /tools/custom/call_sub_agent HTTP/1.1\\r\\nHost: here\\r\\n"
        f"Authorization: Bearer {os.environ['MCP_API_TOKEN']}\\r\\nContent-Length: 100\\r\\n\\r\\n"
    )
    client.sendall(head.encode())
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # a reset, its body never sent: the endpoint cannot answer it
    time.sleep(0.5)
    """
)


def test_a_client_that_hangs_up_on_the_endpoint_leaves_no_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine, workspace = _run(tmp_path, HANGS_UP + MAIN.read_text().split('"""', 2)[2])
    assert drive(engine, ScriptedAgent(_answers(), workspace), io.StringIO()) == "complete"
    engine.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred during processing" not in err


def test_a_fast_path_only_run_killed_between_its_intake_and_its_script_runs_the_script_when_resumed(
    tmp_path: Path,
) -> None:
    engine, workspace = _run(tmp_path, MAIN.read_text(), only=True)
    intake = engine.directive()
    tasks = [{"action": t.action, "expected_result": t.expected_result} for t in intake.ready_tasks or ()]
    engine.step(intake.attempt_id, {"tasks": tasks, "progress_checklist_outcome": "ready"}, "caller")
    engine.close()  # the runner stops here: the intake passed on, no script started
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    out = io.StringIO()
    assert drive(engine, ScriptedAgent(_answers(), workspace), out, fast_path_only=True) == "complete"
    engine.close()
    types = [e["type"] for e in read_journal(tmp_path / "runs" / "p-1")]
    assert types[:2] == ["submit_tasks", "fast_path_started"] and "fast_path_failed" not in types


def test_a_fast_path_only_run_killed_between_a_retrys_intake_and_its_script_runs_the_script_when_resumed(
    tmp_path: Path,
) -> None:
    """Found by the kill loop: an attempt failed (the runner killed while its script ran),
    the resume passed the intake on again and was killed before the script started; the
    next resume runs the script rather than asking an agent the run never asks."""
    engine, workspace = _run(tmp_path, MAIN.read_text(), only=True)
    for _ in range(2):
        intake = engine.directive()
        tasks = [{"action": t.action, "expected_result": t.expected_result} for t in intake.ready_tasks or ()]
        directive = engine.step(
            intake.attempt_id, {"tasks": tasks, "progress_checklist_outcome": "ready"}, "caller"
        )
        if directive.state.fast_path is None:
            engine.journal(
                directive.attempt_id,
                lambda seq, at: FastPathFailed(
                    seq=seq, at=at, by="driver", step="convert-all", reason="killed"
                ),
            )
    engine.close()  # the runner stops here: the retry's intake passed on, no script started
    engine, _ = process.open_process(tmp_path / "runs", "p-1")
    assert (
        drive(engine, ScriptedAgent(_answers(), workspace), io.StringIO(), fast_path_only=True) == "complete"
    )
    engine.close()
    types = [e["type"] for e in read_journal(tmp_path / "runs" / "p-1")]
    assert types[:4] == ["submit_tasks", "fast_path_failed", "submit_tasks", "fast_path_started"]
