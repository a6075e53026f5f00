"""The MCP servers of `todoflow.toml` as the LLM agent's tools: their configuration, the
tools offered as `mcp__<server>__<tool>`, a call reaching the server and its result
reaching the model, and a server that cannot start said before anything runs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime import entries as redaction  # the secrets no entry may hold
from todoflow.runtime.agents.mcp_servers import (
    HttpServer,
    McpError,
    McpToolset,
    StdioServer,
    parse_servers,
)

from ...conftest import ROOT, run_cli, wait_until
from ...support.fake_model import FakeModel

TICKETS = ROOT / "tests" / "support" / "mcp_tickets.py"
CONFIG = Path("/project/todoflow.toml")
FLOW = 'workflow w "W" {\n    regular a "A" {\n        description "File a ticket."\n    }\n}\n'


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def test_servers_are_read_from_the_mcp_table_with_variables_from_the_environment() -> None:
    table = {
        "servers": {
            "tickets": {"command": "python", "args": ["tickets.py"], "env": {"DB": "${HOME_DB}/t.db"}},
            "search": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        }
    }
    tickets, search = parse_servers(table, CONFIG, {"HOME_DB": "/data", "TOKEN": "s3cret"})
    assert tickets == StdioServer("tickets", "python", ("tickets.py",), {"DB": "/data/t.db"}, CONFIG.parent)
    assert search == HttpServer("search", "http://127.0.0.1:8931/mcp", {"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(search)  # a token is never shown
    assert parse_servers({}, CONFIG) == ()


def test_every_problem_of_the_mcp_table_is_said_at_once() -> None:
    table = {
        "timeout": 3,
        "servers": {
            "a": {"command": "x", "cwd": "/", "args": "one"},
            "b": {"url": "http://h/mcp", "headers": {"X": "${NOT_SET}"}},
            "c": {"command": "x", "url": "http://h/mcp"},
            "bad name": {"command": "x"},
            "d": "python d.py",
        },
    }
    with pytest.raises(McpError) as raised:
        parse_servers(table, CONFIG, {})
    assert str(raised.value) == (
        "/project/todoflow.toml:\n"
        "  [mcp] has no key `timeout`; the key is `servers`\n"
        "  [mcp.servers.a] has no key `cwd`; the keys are `command`, `args`, `env`\n"
        "  [mcp.servers.a] args is a list of strings\n"
        "  [mcp.servers.b] headers.X names ${NOT_SET}, which is not set\n"
        "  [mcp.servers.c]: give `command` (a stdio server) or `url` (a Streamable HTTP server)\n"
        "  [mcp.servers.bad name]: a server's name is 1-40 letters, digits, `_` or `-`\n"
        "  [mcp.servers.d] is a table: `command` (stdio) or `url` (Streamable HTTP)"
    )


def test_a_stdio_server_offers_its_tools_under_their_mcp_names_until_closed(tmp_path: Path) -> None:
    (server,) = parse_servers(
        {"servers": {"tickets": {"command": sys.executable, "args": [str(TICKETS)]}}},
        tmp_path / "todoflow.toml",
    )
    toolset = McpToolset((server,))
    try:
        specs = {spec.name: spec for spec in toolset.specs()}
        assert sorted(specs) == [
            "mcp__tickets__echo_env",
            "mcp__tickets__echo_header",
            "mcp__tickets__get_ticket",
            "mcp__tickets__open_ticket",
        ]
        opened = specs["mcp__tickets__open_ticket"]
        assert opened.description == "Open a ticket with a title; returns its id."
        assert opened.parameters["required"] == ["title"]
        deadline = time.monotonic() + 60
        assert toolset.call("mcp__tickets__open_ticket", {"title": "Fix it"}, deadline).content == "T-1"
        assert toolset.call("mcp__tickets__get_ticket", {"ticket": "T-1"}, deadline).content == "Fix it"
        missing = toolset.call("mcp__tickets__get_ticket", {"ticket": "T-9"}, deadline)
        assert missing.content.startswith("error: ") and "no ticket T-9" in missing.content
        assert not missing.refused and missing.detail["error"] == 1
        assert toolset.call("mcp__tickets__nope", {}, deadline).refused
        late = toolset.call("mcp__tickets__open_ticket", {"title": "x"}, time.monotonic() - 1)
        assert late.content == "error: MCP server `tickets` did not answer in 0 s"
    finally:
        toolset.close()
    toolset.close()  # idempotent
    assert toolset.call("mcp__tickets__open_ticket", {"title": "x"}, time.monotonic() + 5).refused


def test_a_streamable_http_server_is_reached_by_its_url_with_its_headers(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(TICKETS), "http", str(port)], stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _listening(port), "the HTTP server to listen")
        (found,) = parse_servers(
            {"servers": {"web": {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Token": "${T}"}}}},
            tmp_path / "todoflow.toml",
            {"T": "t0k"},
        )
        toolset = McpToolset((found,))
        try:
            assert "mcp__web__open_ticket" in [spec.name for spec in toolset.specs()]
            opened = toolset.call("mcp__web__open_ticket", {"title": "Over HTTP"}, time.monotonic() + 60)
            assert opened.content == "T-1" and opened.detail == {"server": "web", "tool": "open_ticket"}
            header = toolset.call("mcp__web__echo_header", {"name": "X-Token"}, time.monotonic() + 60)
            assert header.content == "t0k"
        finally:
            toolset.close()
    finally:
        server.kill()
        server.wait()


def _listening(port: int) -> bool:
    with socket.socket() as client:
        return client.connect_ex(("127.0.0.1", port)) == 0


def test_a_server_that_cannot_start_is_named_with_what_it_said(tmp_path: Path) -> None:
    servers = parse_servers(
        {
            "servers": {
                "gone": {"command": "todoflow-no-such-server"},
                "dies": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no database')"]},
            }
        },
        tmp_path / "todoflow.toml",
    )
    with pytest.raises(McpError) as raised:
        McpToolset(servers).start()
    said = str(raised.value)
    assert "MCP server `gone` did not start: [Errno 2] No such file or directory" in said
    assert "MCP server `dies` did not start" in said and "its stderr ends:\n    no database" in said
    assert said.endswith("(run without MCP servers with --no-mcp)")


def _project(tmp_path: Path, fake: FakeModel, servers: str) -> None:
    (tmp_path / "flow.todoflow").write_text(FLOW)
    (tmp_path / "todoflow.toml").write_text(
        f'[llm]\ndefault = "fake:tiny"\n[llm.providers.fake]\nbase_url = "{fake.url}"\n'
        f'api_key_env = "FAKE_KEY"\n{servers}'
    )


def test_the_models_mcp_call_reaches_the_server_and_its_result_the_model(tmp_path: Path) -> None:
    """`todoflow run --agent llm` with a stdio server in todoflow.toml: its tools are
    offered beside the decision tools, the calls of one message all reach it, their
    results are in the next request, and the provider's key is not in its environment."""
    servers = (
        f"[mcp.servers.tickets]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(TICKETS))}]\n"
        'env = { NOTE = "${TICKET_NOTE}" }\n'
    )

    def complete(request: dict[str, Any]) -> dict[str, Any]:
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        assert results[:4] == ["T-1", "filed by the agent", "unset", results[3]]
        assert results[3].startswith("error: ") and "no ticket T-9" in results[3]
        return _call("complete_todo", todo_id="todo_1", result="filed T-1", evidence="the server said T-1")

    script = [
        [
            _call("mcp__tickets__open_ticket", title="Say hello"),
            _call("mcp__tickets__echo_env", name="NOTE"),
            _call("mcp__tickets__echo_env", name="FAKE_KEY"),
            _call("mcp__tickets__get_ticket", ticket="T-9"),
        ],
        complete,
    ]
    with FakeModel(script) as fake:
        _project(tmp_path, fake, servers)
        done = run_cli(
            "run",
            "flow.todoflow",
            "--agent",
            "llm",
            cwd=tmp_path,
            env={"FAKE_KEY": "sk-not-for-servers", "TICKET_NOTE": "filed by the agent"},
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert fake.unused() == 0 and not fake.unexpected
    offered = {t["function"]["name"]: t["function"] for t in fake.requests[0]["body"]["tools"]}
    assert {"complete_todo", "mcp__tickets__open_ticket", "mcp__tickets__get_ticket"} <= set(offered)
    assert (
        offered["mcp__tickets__open_ticket"]["description"] == "Open a ticket with a title; returns its id."
    )
    assert offered["mcp__tickets__open_ticket"]["parameters"]["required"] == ["title"]


def test_a_server_that_cannot_start_stops_the_run_before_it_starts_unless_no_mcp(tmp_path: Path) -> None:
    script = [_call("complete_todo", todo_id="todo_1", result="done", evidence="no tickets needed")]
    with FakeModel(script) as fake:
        _project(tmp_path, fake, '[mcp.servers.tickets]\ncommand = "todoflow-no-such-server"\n')
        refused = run_cli("run", "flow.todoflow", "--agent", "llm", cwd=tmp_path, env={"FAKE_KEY": "k"})
        assert refused.returncode == 1
        assert "MCP server `tickets` did not start" in refused.stderr and "Traceback" not in refused.stderr
        assert not (tmp_path / ".todoflow").exists() and not fake.requests
        done = run_cli(
            "run", "flow.todoflow", "--agent", "llm", "--no-mcp", cwd=tmp_path, env={"FAKE_KEY": "k"}
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(t["function"]["name"].startswith("mcp__") for t in fake.requests[0]["body"]["tools"])


def test_a_resumed_run_starts_its_servers_first_too(tmp_path: Path) -> None:
    """`run --resume` with the LLM agent makes the same pre-flight: a server that cannot
    start is an error before the run is stepped, and the run stays as it was."""
    (tmp_path / "none.yaml").write_text("replies: []\n")
    with FakeModel([]) as fake:
        _project(tmp_path, fake, '[mcp.servers.tickets]\ncommand = "todoflow-no-such-server"\n')
        stopped = run_cli(
            "run", "flow.todoflow", "--agent", "scripted:none.yaml", "--llm", "fake:tiny", cwd=tmp_path
        )
        assert stopped.returncode == 3, stopped.stdout + stopped.stderr
        (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
        journal = (run / "journal.jsonl").read_bytes()
        resumed = run_cli("run", "--resume", run.name, "--agent", "llm", cwd=tmp_path, env={"FAKE_KEY": "k"})
    assert resumed.returncode == 1 and "MCP server `tickets` did not start" in resumed.stderr
    assert (run / "journal.jsonl").read_bytes() == journal and not fake.requests


def test_what_a_variable_brings_to_env_or_headers_is_a_secret_the_journal_never_keeps() -> None:
    table = {
        "servers": {
            "tickets": {"command": "python", "args": ["${ARG}"], "env": {"DB_PASSWORD": "${PASSWORD}"}},
            "search": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        }
    }
    parse_servers(table, CONFIG, {"ARG": "tickets.py", "PASSWORD": "pg-pass-1", "TOKEN": "tok-2"})
    assert redaction.redact("pg-pass-1 tok-2 tickets.py") == "[redacted] [redacted] tickets.py"


def test_plan_check_mcp_lists_the_servers_tools_or_names_one_that_cannot_start(tmp_path: Path) -> None:
    """`todoflow plan --check-mcp`: each server started, its tools listed for every agent,
    then stopped; a server that cannot start is a pre-flight problem (exit 1)."""
    with FakeModel([]) as fake:
        _project(
            tmp_path, fake, f'[mcp.servers.tickets]\ncommand = "{sys.executable}"\nargs = ["{TICKETS}"]\n'
        )
        listed = run_cli(
            "plan", "flow.todoflow", "--agent", "llm", "--check-mcp", cwd=tmp_path, env={"FAKE_KEY": "k"}
        )
        (tmp_path / "todoflow.toml").write_text(
            (tmp_path / "todoflow.toml").read_text().replace(sys.executable, "todoflow-no-such-server")
        )
        failed = run_cli(
            "plan", "flow.todoflow", "--agent", "llm", "--check-mcp", cwd=tmp_path, env={"FAKE_KEY": "k"}
        )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "mcp__tickets__open_ticket" in listed.stdout
    assert failed.returncode == 1 and "MCP server `tickets` did not start" in failed.stdout + failed.stderr
    assert not (tmp_path / ".todoflow").exists() and not fake.requests
