"""The LLM agent with its workspace tools, through `todoflow run --agent llm` against the
fake OpenAI-compatible server on loopback: the model writes the expected files itself
(the fake never touches the workspace), ways out of the workspace come back refused and
the run goes on, every call is audited, and a broken or stalled server is a clear,
resumable stop."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ...conftest import run_cli, wait_until
from ...support.fake_model import FakeModel
from ...support.runtime_helpers import alive

SECRET = "sk-test-tools-0123456789-never-in-a-command"
FLOW = """\
workflow w "W" {
    llm fake "m"
    todo_task build "Build" {
        description "Build the app."
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/app."
                expect file "dist/app"
            }
        }
        tasks {
            "Compile it" => "dist/app exists"
        }
    }
    regular docs "Document" {
        description "Write the README."
        expect file "README.md"
    }
}
"""


WORKSPACE_TOOLS = "read_file, write_file, edit_file, list_files, search_files"


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _project(tmp_path: Path, fake: FakeModel, tools: str = "") -> Path:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    (tmp_path / "todoflow.toml").write_text(
        f'[llm.providers.fake]\nbase_url = "{fake.url}"\napi_key_env = "FAKE_KEY"\n{tools}'
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("TOPSECRET")
    (workspace / "out").symlink_to(tmp_path)
    return workspace


def _run(tmp_path: Path, *more: str) -> Any:
    return run_cli(
        "run", "flow.todoflow", "--agent", "llm", "--workspace", "workspace", *more,
        cwd=tmp_path, env={"FAKE_KEY": SECRET},
    )  # fmt: skip


def _results(fake: FakeModel, index: int) -> list[str]:
    """The tool results request `index` carried (what the model was told of its calls)."""
    return [m["content"] for m in fake.requests[index]["body"]["messages"] if m["role"] == "tool"]


def test_a_model_writes_the_expected_files_through_its_tools(tmp_path: Path) -> None:
    script = [
        _call(
            "submit_todo_task_result",
            next_action="delegate",
            selected_route_id="compile",
            todo_id_to_execute="todo_1",
            instructions_to_sub_agent="Put the binary in dist/app.",
        ),
        [_call("read_file", path="../outside.txt"), _call("read_file", path=str(tmp_path / "outside.txt"))],
        [_call("read_file", path="out/outside.txt"), _call("run_command", command="echo hi > dist/app")],
        _call("write_file", path="dist/app", content="binary v1\n"),
        _call("complete_todo", result="built", evidence="dist/app written"),
        _call("write_file", path="README.md", content="run dist/app\n"),
        _call("edit_file", path="README.md", old_string="run", new_string="Run"),
        [
            _call("read_file", path="README.md"),
            _call("complete_todo", todo_id="todo_1", result="ok", evidence="README.md"),
        ],
    ]
    with FakeModel(script) as fake:
        workspace = _project(tmp_path, fake)
        done = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fake.unused() == 0 and not fake.unexpected
    assert (workspace / "dist" / "app").read_text() == "binary v1\n"
    assert (workspace / "README.md").read_text() == "Run dist/app\n"
    refusals = _results(fake, 3)  # a conversation keeps what it was told
    assert refusals[:3] == [
        "refused: `../outside.txt` resolves outside the workspace",
        f"refused: `{tmp_path / 'outside.txt'}` resolves outside the workspace",
        "refused: `out/outside.txt` resolves outside the workspace",
    ]
    assert refusals[3].startswith("refused: `run_command` is not a tool here")
    assert not any("TOPSECRET" in json.dumps(r["body"]) for r in fake.requests)
    # the tools offered: the decision tools, then the workspace's (no shell: it is off)
    names = [t["function"]["name"] for t in fake.requests[1]["body"]["tools"]]
    assert names == [
        "complete_todo", "update_todo", "report_failure",
        "read_file", "write_file", "edit_file", "list_files", "search_files",
    ]  # fmt: skip
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    audited = [e for e in _events(run) if e["event"] == "ToolCalled"]
    assert [(e["agent"], e["tool"], e["refused"]) for e in audited] == [
        ("compile", "read_file", True),
        ("compile", "read_file", True),
        ("compile", "read_file", True),
        ("compile", "write_file", False),
        ("orchestrator", "write_file", False),
        ("orchestrator", "edit_file", False),
        ("orchestrator", "read_file", False),
    ]  # run_command is no tool here: refused by the agent, not a toolset's call
    assert audited[3]["file"] == "dist/app" and audited[3]["todo"] == "todo_1"
    assert audited[5]["file_sha256"] == _sha256(b"Run dist/app\n")
    assert all(len(e["arguments_sha256"]) == 64 and e["arguments_bytes"] > 0 for e in audited)
    log = run_cli("log", run.name, cwd=tmp_path).stdout
    assert "tool: compile called write_file (" in log and ": dist/app sha256 " in log
    rows = json.loads(run_cli("log", run.name, "--json", cwd=tmp_path).stdout)
    calls = [c for step in rows["steps"] for it in step["iterations"] for c in it.get("tool_calls", [])]
    assert len(calls) == 7
    report = run_cli("report", run.name, "-o", "report.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "compile called write_file (" in (tmp_path / "report.html").read_text()


def test_the_shell_when_allowed_runs_in_the_workspace_without_the_key(tmp_path: Path) -> None:
    script = [
        _call("run_command", command="pwd > README.md; env >> README.md"),
        _call("complete_todo", todo_id="todo_1", result="ok", evidence="README.md"),
    ]
    flow = FLOW[: FLOW.index("    todo_task")] + FLOW[FLOW.index("    regular docs") :]
    with FakeModel(script) as fake:
        workspace = _project(tmp_path, fake, "[tools]\nshell = true\nshell_timeout_s = 30\n")
        (tmp_path / "flow.todoflow").write_text(flow)
        done = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    written = (workspace / "README.md").read_text()
    assert written.startswith(f"{workspace}\n") and SECRET not in written and "FAKE_KEY" not in written
    assert "exit code: 0" in _results(fake, 1)[0]
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    (called,) = [e for e in _events(run) if e["event"] == "ToolCalled"]
    assert called["command"] == "pwd > README.md; env >> README.md" and called["exit_code"] == 0


_COMMAND = "echo built > README.md; sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"
_COMMAND_SCRIPT = [
    _call("run_command", command=_COMMAND),
    _call("complete_todo", todo_id="todo_1", result="ok", evidence="README.md"),
]


@contextlib.contextmanager
def _as_from_a_terminal() -> Iterator[None]:
    """The stop signals heard, not ignored, while the runner is started, so it starts with
    them at their defaults as from a terminal, whatever the test run ignores (a background
    job ignores Ctrl-C, `nohup` SIGHUP): the runner rightly keeps ignoring what it was
    started ignoring, and an ignored disposition is what a child inherits."""
    ignored = [
        n for n in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) if signal.getsignal(n) is signal.SIG_IGN
    ]
    for number in ignored:
        signal.signal(number, signal.default_int_handler)
    try:
        yield
    finally:
        for number in ignored:
            signal.signal(number, signal.SIG_IGN)


def _runner_in_a_command(tmp_path: Path, fake: FakeModel) -> tuple[subprocess.Popen[str], int, int]:
    """`todoflow run` of a one-step flow whose model runs `_COMMAND` (a shell that forks a
    long sleep); the runner, the shell's and the sleep's pids once both are written."""
    workspace = _project(tmp_path, fake, "[tools]\nshell = true\n")
    flow = FLOW[: FLOW.index("    todo_task")] + FLOW[FLOW.index("    regular docs") :]
    (tmp_path / "flow.todoflow").write_text(flow)
    with _as_from_a_terminal():
        runner = subprocess.Popen(
            [sys.executable, "-m", "todoflow", "run", "flow.todoflow", "--agent", "llm",
             "--workspace", "workspace"],
            cwd=tmp_path, env={**os.environ, "FAKE_KEY": SECRET},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    pids = [workspace / "shell.pid", workspace / "child.pid"]
    wait_until(lambda: all(p.exists() and p.read_text().strip() for p in pids), "the command's pids")
    shell, child = (int(p.read_text()) for p in pids)
    return runner, shell, child


@pytest.mark.parametrize(
    ("stop", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_signal_to_the_runner_kills_the_running_command_with_its_children(
    tmp_path: Path, stop: signal.Signals, status: int
) -> None:
    """SIGTERM, SIGINT or SIGHUP of `todoflow run` while a `run_command` runs: the
    command's shell and the child it forked are killed with it, the runner ends without a
    traceback, and the run resumes where it was."""
    with FakeModel(_COMMAND_SCRIPT) as fake:
        runner, shell, child = _runner_in_a_command(tmp_path, fake)
        runner.send_signal(stop)
        _, stderr = runner.communicate(timeout=60)
        try:
            assert runner.returncode == status and "Traceback" not in stderr, stderr
            wait_until(lambda: not alive(shell) and not alive(child), "the command and its child to die")
        except BaseException:  # a failing test leaves nothing running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell, signal.SIGKILL)
            raise
        (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
        resumed = run_cli(
            "run", "--resume", run.name, "--agent", "llm", cwd=tmp_path, env={"FAKE_KEY": SECRET}
        )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert fake.unused() == 0 and not fake.unexpected


def test_a_command_a_killed_runner_left_running_is_killed_when_the_run_resumes(tmp_path: Path) -> None:
    """SIGKILL of `todoflow run` while a `run_command` runs: nothing of the runner is left
    to kill the command, whose group lives on with no time limit; it was journaled as it
    started, so the resumed run kills it (the shell and the child it forked) before its
    agent does anything, and says so. The log and the audit show the command."""
    with FakeModel(_COMMAND_SCRIPT) as fake:
        runner, shell, child = _runner_in_a_command(tmp_path, fake)
        (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
        wait_until(lambda: "command_started" in (run / "journal.jsonl").read_text(), "the command's start")
        runner.kill()
        runner.communicate()  # its pipes closed
        try:
            assert alive(shell) and alive(child)  # nobody is left to stop it
            resumed = run_cli(
                "run", "--resume", run.name, "--agent", "llm", cwd=tmp_path, env={"FAKE_KEY": SECRET}
            )
            wait_until(lambda: not alive(shell) and not alive(child), "the command and its child to die")
        finally:  # a failing test leaves nothing running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell, signal.SIGKILL)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"[docs] killed what was left of `{_COMMAND}` (process group {shell})" in resumed.stdout
    assert fake.unused() == 0 and not fake.unexpected
    (started,) = [e for e in _events(run) if e["event"] == "CommandStarted"]
    assert (started["command"], started["group"], started["agent"]) == (_COMMAND, shell, "orchestrator")
    assert not [e for e in _events(run) if e["event"] == "ToolCalled"]  # the call never ended
    log = run_cli("log", run.name, cwd=tmp_path).stdout
    assert f"command: orchestrator started `{_COMMAND}`" in log


def test_a_signal_the_runner_was_started_ignoring_stays_ignored() -> None:
    """`nohup todoflow run ...`: SIGHUP was ignored, and stays so while the run lasts;
    SIGTERM stops it; both are as they were afterwards."""
    from todoflow.runtime.agents.driver import stopped_by_signals

    before, term = signal.signal(signal.SIGHUP, signal.SIG_IGN), signal.getsignal(signal.SIGTERM)
    try:
        with stopped_by_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, term)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is term
    finally:
        signal.signal(signal.SIGHUP, before)


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_the_configuration_refuses_unknown_keys_and_is_recorded(tmp_path: Path) -> None:
    from todoflow.runtime.agents.llm_config import LlmConfigError, load_config

    (tmp_path / "todoflow.toml").write_text("[tools]\nshell = true\nshel_timeout = 5\n")
    with pytest.raises(
        LlmConfigError, match=r"\[tools\] has no `shel_timeout`; it knows `shell`, `shell_timeout_s`"
    ):
        load_config(tmp_path, None, None)
    (tmp_path / "todoflow.toml").write_text('[llms]\ndefault = "x:y"\n')
    with pytest.raises(
        LlmConfigError, match="the configuration has no `llms`; it knows `llm`, `tools`, `mcp`"
    ):
        load_config(tmp_path, None, None)
    other = tmp_path / "elsewhere.toml"
    other.write_text('[tools]\nshell_timeout_s = 30\n[mcp.servers.t]\ncommand = "python"\n')
    read = load_config(tmp_path, None, None, file=other)
    assert read.tools.shell_timeout_s == 30 and not read.tools.shell
    assert read.mcp == {"servers": {"t": {"command": "python"}}}  # kept raw, for the MCP servers' reader
    assert read.source.path == other.resolve() and read.source.sha256 == _sha256(other.read_bytes())


def test_allow_shell_and_a_named_configuration_on_the_command_line(tmp_path: Path) -> None:
    script = [
        _call("run_command", command="echo made > README.md"),
        _call("complete_todo", todo_id="todo_1", result="ok", evidence="README.md"),
    ]
    flow = FLOW[: FLOW.index("    todo_task")] + FLOW[FLOW.index("    regular docs") :]
    with FakeModel(script) as fake:
        workspace = _project(tmp_path, fake)
        (tmp_path / "todoflow.toml").rename(tmp_path / "models.toml")
        (tmp_path / "flow.todoflow").write_text(flow)
        done = _run(tmp_path, "--config", "models.toml", "--allow-shell")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "README.md").read_text() == "made\n"
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    meta = json.loads((run / "run.json").read_text())
    assert meta["config"] == str((tmp_path / "models.toml").resolve())
    assert meta["config_sha256"] == _sha256((tmp_path / "models.toml").read_bytes())


TIDY = 'workflow w "W" {\n    llm fake "m"\n    regular a "A" {\n        description "Tidy."\n    }\n}\n'


def _agent(fake: FakeModel, monkeypatch: pytest.MonkeyPatch, workspace: Path) -> Any:
    from todoflow.runtime.agents.llm import LlmAgent
    from todoflow.runtime.agents.llm_config import LlmConfig, Provider
    from todoflow.runtime.agents.workspace_tools import WorkspaceTools
    from todoflow.runtime.llm_choice import LlmChoices

    monkeypatch.setenv("FAKE_KEY", SECRET)
    config = LlmConfig({"fake": Provider("fake", fake.url, "FAKE_KEY")}, LlmChoices())
    return LlmAgent(config, toolsets=(WorkspaceTools(workspace),))


DONE = _call("complete_todo", todo_id="todo_1", result="ok", evidence="tidied")
MALFORMED = [
    (
        {"raw": "<html><body>502 Bad Gateway</body></html>", "content_type": "text/html"},
        "not a chat completion",
    ),
    ({"raw": "{not json", "content_type": "application/json"}, "the body is not JSON"),
    ({"choices": []}, "its `choices` is empty"),
    ({"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}, "its message is null"),
    ({"raw": "x" * 60, "content_type": "application/json", "trickle_s": 0.05}, "did not answer within"),
]


@pytest.mark.parametrize(
    ("answer", "said"), MALFORMED, ids=["html", "not-json", "no-choices", "null", "trickle"]
)
def test_a_malformed_or_stalled_response_is_a_clear_resumable_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any], said: str
) -> None:
    import io

    from todoflow.runtime.agents import llm
    from todoflow.runtime.agents.driver import drive

    from ...support.runtime_helpers import start

    monkeypatch.setattr(llm, "REQUEST_DEADLINE_S", 1.0)
    engine, _ = start(tmp_path, TIDY)
    out = io.StringIO()
    with FakeModel([answer]) as fake:
        assert drive(engine, _agent(fake, monkeypatch, tmp_path / "workspace"), out) == "stopped"
    assert "stopped: " in out.getvalue() and said in out.getvalue()
    assert "the model server of provider `fake`" in out.getvalue() or "model call failed" in out.getvalue()
    with FakeModel([DONE]) as fake:  # resumed: it goes on
        assert drive(engine, _agent(fake, monkeypatch, tmp_path / "workspace"), io.StringIO()) == "complete"
    engine.close()


def test_tool_calls_are_bounded_per_message_and_by_argument_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import time

    from todoflow.runtime.agents.driver import drive
    from todoflow.runtime.agents.llm_tools import MAX_ARGUMENT_BYTES, MAX_CALLS_PER_MESSAGE

    from ...support.runtime_helpers import start

    engine, store = start(tmp_path, TIDY)
    (tmp_path / "workspace" / "a.txt").write_text("a\n")
    reads = [_call("read_file", path="a.txt")] * 3000
    huge = _call("write_file", path="big.txt", content="x" * (MAX_ARGUMENT_BYTES + 1))
    started = time.monotonic()
    with FakeModel([reads, huge, DONE]) as fake:
        assert drive(engine, _agent(fake, monkeypatch, tmp_path / "workspace"), io.StringIO()) == "complete"
    engine.close()
    assert time.monotonic() - started < 60
    results = _results(fake, 1)
    assert len(results) == 3000 and results.count("     1\ta") == MAX_CALLS_PER_MESSAGE
    assert results[-1] == f"not run: at most {MAX_CALLS_PER_MESSAGE} tool calls run per message"
    assert _results(fake, 2)[-1].startswith("refused: the arguments are ")
    assert not (tmp_path / "workspace" / "big.txt").exists()
    audited = [e for e in _events(store.folder) if e["event"] == "ToolCalled"]
    assert len(audited) == MAX_CALLS_PER_MESSAGE  # the oversized call ran nothing


def test_the_prompts_carry_the_todo_and_name_the_tools_offered(tmp_path: Path) -> None:
    script = [
        _call(
            "submit_todo_task_result",
            next_action="delegate",
            selected_route_id="compile",
            todo_id_to_execute="todo_1",
            instructions_to_sub_agent="Put the binary in dist/app.",
        ),
        _call("write_file", path="dist/app", content="binary\n"),
        _call("complete_todo", result="built", evidence="dist/app written"),
        _call("write_file", path="README.md", content="run dist/app\n"),
        _call("complete_todo", todo_id="todo_1", result="ok", evidence="README.md"),
    ]
    with FakeModel(script) as fake:
        _project(tmp_path, fake)
        done = _run(tmp_path, "--show-prompts")
    assert done.returncode == 0, done.stdout + done.stderr
    sub = fake.texts(1)
    assert "Your todo: todo_1." in sub and "confirm with `complete_todo`: `evidence`" in sub
    assert "call `report_failure` with the reason" in sub and "`failed`" not in sub
    tools = "complete_todo, update_todo, report_failure, " + WORKSPACE_TOOLS
    assert sub.rstrip().endswith(f"todo: todo_1\ntools: [{tools}]")
    assert "Confirm with `complete_todo`" in fake.texts(3)
    assert f"todo: todo_1\ntools: [{tools}]" in done.stdout  # --show-prompts shows them too
