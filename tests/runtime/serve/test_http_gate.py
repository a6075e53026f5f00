"""The layer `serve --http` puts around the SDK's app, in process: the bound on requests in
flight (503), the deadline per request (504), tokens, the address rules (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from todoflow.runtime import entries as redaction  # the secrets no entry may hold
from todoflow.runtime.serve.http import Gate, HttpOptions, checked, parse_address, read_tokens, server_config
from todoflow.runtime.serve.service import ServeError, TodoService, Workflows

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _gate(tmp_path: Path, app: Any, **options: Any) -> Gate:
    service = TodoService(Workflows([]), tmp_path / "runs", tmp_path)
    return Gate(app, service, HttpOptions(**options))


async def _post(
    gate: Gate, headers: list[tuple[bytes, bytes]] | None = None, path: str = "/mcp"
) -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"method": "tools/list"}', "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": headers or []}
    await gate(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


async def test_requests_past_the_bound_in_flight_are_told_to_retry(tmp_path: Path) -> None:
    release = anyio.Event()

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    gate = _gate(tmp_path, slow, max_in_flight=2)
    statuses: list[int] = []

    async def one() -> None:
        statuses.append((await _post(gate))[0])

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(one)
        await anyio.sleep(0.2)
        assert statuses == [503]
        release.set()
    assert sorted(statuses) == [200, 200, 503] and gate.in_flight == 0


async def test_a_request_past_its_deadline_is_504(tmp_path: Path) -> None:
    async def stuck(scope: Any, receive: Any, send: Any) -> None:
        await anyio.sleep(60)

    status, body = await _post(_gate(tmp_path, stuck, deadline=0.2))
    assert status == 504 and b"send the same call again" in body


async def test_tokens_are_checked_before_the_app_is_reached(tmp_path: Path) -> None:
    reached: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    gate = _gate(tmp_path, app, tokens=("first-token", "second-token"))
    assert (await _post(gate))[0] == 401
    assert (await _post(gate, [(b"authorization", b"Bearer second-tokem")]))[0] == 401
    assert not reached
    assert (await _post(gate, [(b"authorization", b"bearer second-token")]))[0] == 200


async def test_calls_go_straight_to_the_endpoint_past_the_app_s_routing(tmp_path: Path) -> None:
    reached: list[str] = []

    def answering(name: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            reached.append(f"{name} {scope['type']} {scope.get('path', '')}")
            if scope["type"] == "http":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"{}"})

        return app

    service = TodoService(Workflows([]), tmp_path / "runs", tmp_path)
    gate = Gate(answering("app"), service, HttpOptions(path="/rpc"), endpoint=answering("endpoint"))
    await _post(gate)  # at /mcp: not the path served
    await _post(gate, path="/rpc")
    await gate({"type": "lifespan"}, None, None)
    assert reached == ["app http /mcp", "endpoint http /rpc", "app lifespan "]


def test_requests_are_parsed_by_httptools_not_the_pure_python_h11(tmp_path: Path) -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    config = server_config(_gate(tmp_path, None), HttpOptions())
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol


def test_addresses_tokens_and_the_loopback_rule(tmp_path: Path) -> None:
    assert parse_address("8000") == ("127.0.0.1", 8000)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    with pytest.raises(ServeError, match="port from 0 to 65535"):
        parse_address("host:http")
    file = tmp_path / "tokens"
    file.write_text("# ours\n\nalpha-token\n  beta-token  \n")
    assert read_tokens(file, "ignored") == ("alpha-token", "beta-token")
    assert read_tokens(None, "gamma") == ("gamma",)
    file.write_text("# none yet\n")
    with pytest.raises(ServeError, match=r"^the token file .* holds no token$"):
        read_tokens(file, None)
    with pytest.raises(ServeError, match=r"refusing to serve 0\.0\.0\.0 without a token"):
        checked(HttpOptions(host="0.0.0.0"))
    assert checked(HttpOptions(host="0.0.0.0", tokens=("t",))).host == "0.0.0.0"
    assert checked(HttpOptions(host="::1")).host == "::1"


async def test_the_access_log_in_json_names_the_call_never_its_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    gate = _gate(tmp_path, app, tokens=("secret-token",), log_format="json")
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "step", "arguments": {"processId": "p-1", "evidence": "private words"}},
    }
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": json.dumps(call).encode(), "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    headers = [(b"authorization", b"Bearer secret-token")]
    await gate({"type": "http", "method": "POST", "path": "/mcp", "headers": headers}, receive, send)
    line = capsys.readouterr().err.strip()
    logged = json.loads(line)
    assert {k: logged[k] for k in ("http", "path", "method", "tool", "processId", "status")} == {
        "http": "POST",
        "path": "/mcp",
        "method": "tools/call",
        "tool": "step",
        "processId": "p-1",
        "status": 200,
    }
    assert "private words" not in line and "secret-token" not in line


def test_tokens_read_are_secrets_redacted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(redaction, "_SECRETS", [()])
    file = tmp_path / "tokens"
    file.write_text("delta-token-1\n")
    read_tokens(file, None)
    assert redaction.redact("the client sent delta-token-1 back") == "the client sent [redacted] back"
