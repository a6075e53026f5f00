"""A run's spans: derived from its journal (`todoflow trace`), exported live through the
OpenTelemetry SDK (`run --trace otlp`), one trace either way."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.agents.tracing import LiveTrace
from todoflow.runtime.llm_choice import ToolUse, Usage
from todoflow.runtime.plan import Llm
from todoflow.runtime.views.trace import otlp_json, run_spans, trace_id

from ...conftest import ROOT, run_cli
from ...support.runtime_helpers import CHECKLIST, confirm, intake, start

ORCHESTRATED = ROOT / "examples" / "orchestrated.todoflow"
REPLIES = ROOT / "examples" / "replies" / "orchestrated.yaml"


def _run_orchestrated(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    result = run_cli(
        "run",
        str(ORCHESTRATED),
        "--agent",
        f"scripted:{REPLIES}",
        "--run-dir",
        "runs",
        "--workspace",
        "ws",
        "--learnings",
        "learnings",
        *extra,
        cwd=tmp_path,
        env=env,
    )
    (run,) = (tmp_path / "runs").iterdir()
    return result, run.name


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for r in request["resourceSpans"] for s in r["scopeSpans"] for span in s["spans"]]


def _traced(tmp_path: Path, pid: str, *options: str) -> list[dict[str, Any]]:
    result = run_cli("trace", pid, "--run-dir", "runs", *options, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return _spans(json.loads(result.stdout))


def test_a_run_is_a_tree_of_spans_derived_from_its_journal(tmp_path: Path) -> None:
    result, pid = _run_orchestrated(tmp_path)
    assert result.returncode == 0, result.stderr
    spans = _traced(tmp_path, pid)
    by_id = {span["spanId"]: span for span in spans}
    assert len(by_id) == len(spans)  # every span once
    assert {span["traceId"] for span in spans} == {trace_id(pid)}
    (root,) = [span for span in spans if "parentSpanId" not in span]
    assert root["name"] == "todoflow run docs-release"
    assert all(span["parentSpanId"] in by_id for span in spans if span is not root)
    names = [span["name"] for span in spans]
    assert "step publish" in names and "intake" in names and "turn 1" in names
    delegations = [span for span in spans if span["name"].startswith("delegate ")]
    failed = [span for span in delegations if span["status"]["code"] == 2]
    assert len(failed) == 1  # the example's first build fails prevalidation, then passes
    said = {a["key"]: a["value"] for a in failed[0]["attributes"]}
    assert said["todoflow.prevalidation.passed"] == {"boolValue": False}
    assert "does not exist in the workspace" in said["todoflow.prevalidation.reason"]["stringValue"]
    for span in spans:  # a child lies within its parent
        if "parentSpanId" in span:
            parent = by_id[span["parentSpanId"]]
            assert int(parent["startTimeUnixNano"]) <= int(span["startTimeUnixNano"])
            assert int(span["endTimeUnixNano"]) <= int(parent["endTimeUnixNano"])
    assert _traced(tmp_path, pid) == spans  # derived, not drawn: the same ids every time


def test_model_calls_follow_the_genai_conventions_and_carry_text_only_when_asked(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    call = Usage("orchestrator", Llm("openai", "gpt-4.1-mini"), "default", 120, 30, 450)
    directive = engine.step(engine.directive().attempt_id, intake("a"), usage=[call])
    engine.step(directive.attempt_id, confirm(1), usage=[call])
    entries = store.entries()
    plain = run_spans(engine.plan, engine.process_id, store.started_at, entries)
    chats = [span for span in plain if span.name == "chat gpt-4.1-mini"]
    assert len(chats) == 2
    attributes = dict(chats[0].attributes)
    assert attributes["gen_ai.request.model"] == "gpt-4.1-mini"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (120, 30)
    assert chats[0].end_ns - chats[0].start_ns == 450_000_000
    assert not any(key.startswith("gen_ai.prompt") for span in plain for key in span.attributes)
    with_text = run_spans(engine.plan, engine.process_id, store.started_at, entries, content=True)
    prompt = next(span for span in with_text if span.name.startswith("chat")).attributes["gen_ai.prompt"]
    assert isinstance(prompt, str) and "Do the work." in prompt  # the intake's prompt, rendered again
    engine.close()


def test_tool_calls_are_execute_tool_spans_with_their_command_only_when_asked(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    write = ToolUse("orchestrator", "write_file", "todo_1", "ab" * 32, 40, 12, 3, False, {"file": "a.txt"})
    shell = ToolUse(
        "orchestrator",
        "run_command",
        "todo_1",
        "cd" * 32,
        30,
        9,
        250,
        False,
        {"command": "make", "exit_code": 2},
    )
    directive = engine.step(engine.directive().attempt_id, intake("a"))
    engine.step(directive.attempt_id, confirm(1), usage=[write, shell])
    entries = store.entries()
    plain = run_spans(engine.plan, engine.process_id, store.started_at, entries)
    tools = {span.name: span for span in plain if span.name.startswith("execute_tool ")}
    assert set(tools) == {"execute_tool write_file", "execute_tool run_command"}
    ran = dict(tools["execute_tool run_command"].attributes)
    assert ran["gen_ai.operation.name"] == "execute_tool" and ran["gen_ai.tool.name"] == "run_command"
    assert ran["todoflow.tool.exit_code"] == 2 and "todoflow.tool.command" not in ran
    assert (
        tools["execute_tool run_command"].end_ns - tools["execute_tool run_command"].start_ns == 250_000_000
    )
    assert dict(tools["execute_tool write_file"].attributes)["todoflow.tool.file"] == "a.txt"
    turn = next(span for span in plain if span.name == "turn 1")
    assert all(span.parent_id == turn.span_id for span in tools.values())
    with_text = run_spans(engine.plan, engine.process_id, store.started_at, entries, content=True)
    said = next(span for span in with_text if span.name == "execute_tool run_command").attributes
    assert said["todoflow.tool.command"] == "make"
    engine.close()


def test_a_live_trace_exports_each_span_once_across_a_stop_and_a_resume(tmp_path: Path) -> None:
    engine, store = start(tmp_path, CHECKLIST)
    exporter = InMemorySpanExporter()
    (tmp_path / "workspace" / "out.txt").write_text("done")
    first = ScriptedAgent([intake("a", "b"), confirm(1)], engine.workspace)
    live = LiveTrace(engine, exporter)
    assert drive(engine, first, io.StringIO(), observe=live.update) == "stopped"
    live.update()
    before = {span.context.span_id for span in exporter.get_finished_spans()}  # type: ignore[union-attr]
    assert before and not any(span.name.startswith("step ") for span in exporter.get_finished_spans())
    engine.close()
    engine, store = process.open_process(tmp_path / "runs", "p-1")
    second = ScriptedAgent([intake("a", "b"), confirm(1), confirm(2)], engine.workspace)
    live = LiveTrace(engine, exporter)
    assert drive(engine, second, io.StringIO(), observe=live.update) == "complete"
    live.close()
    exported = exporter.get_finished_spans()
    ids = [span.context.span_id for span in exported]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids))  # nothing exported twice
    expected = run_spans(engine.plan, engine.process_id, store.started_at, store.entries())
    assert sorted(ids) == sorted(int(span.span_id, 16) for span in expected)
    assert {span.context.trace_id for span in exported} == {int(trace_id("p-1"), 16)}  # type: ignore[union-attr]
    engine.close()


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict[str, str], dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        headers = {key.lower(): value for key, value in self.headers.items()}
        _Receiver.received.append((self.path, headers, json.loads(body)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def receiver() -> Iterator[str]:
    """An OTLP/HTTP receiver on loopback, written for the test: it keeps what it is sent."""
    _Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_run_exports_its_spans_over_otlp_http_as_todoflow_trace_derives_them(
    tmp_path: Path, receiver: str
) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver, "OTEL_EXPORTER_OTLP_HEADERS": "x-team=flows%20team"}
    result, pid = _run_orchestrated(tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert {path for path, _, _ in _Receiver.received} == {"/v1/traces"}
    assert all(headers.get("x-team") == "flows team" for _, headers, _ in _Receiver.received)
    live = [span for _, _, request in _Receiver.received for span in _spans(request)]
    assert sorted(live, key=lambda s: s["spanId"]) == sorted(
        _traced(tmp_path, pid), key=lambda s: s["spanId"]
    )


def test_a_receiver_that_is_down_is_said_once_and_the_run_goes_on(tmp_path: Path) -> None:
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
    result, _ = _run_orchestrated(tmp_path, "--trace", "otlp", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("traces not exported to http://127.0.0.1:9/v1/traces") == 1
    assert "Traceback" not in result.stderr


def test_tracing_without_the_sdk_says_which_extra_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None; sys.modules['opentelemetry.sdk'] = None; "
        "from todoflow.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    (tmp_path / "ws").mkdir()
    command = [sys.executable, "-c", code, "run", str(ORCHESTRATED), "--agent", f"scripted:{REPLIES}"]
    result = subprocess.run(
        [*command, "--run-dir", "runs", "--workspace", "ws", "--trace", "otlp"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "pip install 'todoflow[otel]'" in result.stderr and "Traceback" not in result.stderr


def test_the_otlp_json_of_a_span_is_the_protocol_s_shape() -> None:
    from todoflow.runtime.views.trace import Span

    span = Span("x", "00f067aa0ba902b7", None, 1, 2, {"a": 1, "b": True, "c": "s", "d": 0.5}, failed=True)
    encoded = otlp_json([span], "4bf92f3577b34da6a3ce929d0e0e4736")["resourceSpans"][0]
    (out,) = encoded["scopeSpans"][0]["spans"]
    assert out["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736" and out["spanId"] == "00f067aa0ba902b7"
    assert (out["startTimeUnixNano"], out["endTimeUnixNano"], out["status"]) == ("1", "2", {"code": 2})
    assert out["attributes"] == [
        {"key": "a", "value": {"intValue": "1"}},
        {"key": "b", "value": {"boolValue": True}},
        {"key": "c", "value": {"stringValue": "s"}},
        {"key": "d", "value": {"doubleValue": 0.5}},
    ]
    assert encoded["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "todoflow"}}
    ]
