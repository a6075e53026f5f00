"""`todoflow serve --http`: the MCP server of `serve.mcp` over Streamable HTTP.

The transport is the `mcp` SDK's own, in its stateless mode with JSON responses: no
session lives in the process, so any instance over one store answers any call. Around it,
one ASGI layer of our own (outermost first): the access log, `/healthz` and `/readyz`
(no token needed, nothing revealed), bearer tokens (constant-time comparison; 401 with
`WWW-Authenticate`), a bound on requests in flight (503) and a deadline per request
(504). The SDK refuses a body past `HttpOptions.max_body` with 413 before parsing it.
uvicorn serves it; SIGTERM drains (no new requests, those in flight answered) and the
process exits 0. Under `--workers` (`workers.py`) each worker serves the socket its
supervisor listens on (`HttpOptions.fd`).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..entries import keep
from .service import ServeError, TodoService

if TYPE_CHECKING:
    import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "TODOFLOW_SERVE_TOKEN"
LOOPBACK_NAMES = ("localhost",)
READY_WITHIN = 5.0  # seconds /readyz waits for the store before it says 503
# uvicorn's C parser (the `mcp` extra installs it), never its pure-Python fallback h11:
# h11 costs the event loop 0.1-0.2 ms more per request (docs/performance.md, "Over HTTP")
PARSER = "httptools"


@dataclass(frozen=True)
class HttpOptions:
    """Where and how `serve --http` listens, and its bounds (docs/mcp.md, "Over HTTP")."""

    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    tokens: tuple[str, ...] = ()
    max_body: int = 1024 * 1024  # bytes of one request body
    max_in_flight: int = 32  # MCP requests one instance answers at once
    deadline: float = 60.0  # seconds one request may take (a learn_code call waits at most 20)
    drain: int = 30  # seconds SIGTERM waits for requests in flight
    log_format: Literal["text", "json"] = "text"
    fd: int | None = None  # a worker of `--workers`: the socket its supervisor listens on


def parse_address(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (an IPv6 host in brackets: `[::1]:8000`) as (host, port); port 0 asks
    the system for a free one (the URL served is printed on stderr)."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ServeError(f"--http takes [HOST:]PORT with a port from 0 to 65535, not `{text}`")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_tokens(file: Path | None, environment: str | None) -> tuple[str, ...]:
    """The bearer tokens, one a line (blank lines and `#` comments skipped): from `file`,
    else from the environment's value. Never echoed: errors name the file only."""
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as error:
            raise ServeError(f"cannot read the token file {file}: {error.strerror or error}") from None
        except UnicodeDecodeError:
            raise ServeError(f"the token file {file} is not UTF-8 text") from None
        where = f"the token file {file}"
    else:
        text, where = environment or "", f"${TOKEN_ENV}"
    tokens = tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    if (file is not None or environment) and not tokens:
        raise ServeError(f"{where} holds no token")
    if any(len(token.split()) > 1 for token in tokens):
        raise ServeError(f"{where}: a token is one word, one a line")
    keep(*tokens)  # a model or a client that echoes one must not put it in a journal
    return tokens


def checked(options: HttpOptions) -> HttpOptions:
    """`options`, or why they may not be served: a non-loopback address needs a token."""
    if not options.tokens and not is_loopback(options.host):
        raise ServeError(
            f"refusing to serve {options.host} without a token: anyone who can reach it could start and "
            f"drive runs. Give --token-file FILE or ${TOKEN_ENV}, or bind 127.0.0.1"
        )
    if not options.path.startswith("/"):
        raise ServeError(f"--path starts with `/`, not `{options.path}`")
    return options


def authorized(scope: Scope, tokens: tuple[str, ...]) -> bool | None:
    """True: a token matches; False: a token was given and matches none; None: none given."""
    header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    sent = given.strip().encode()
    # every token compared, each in constant time: neither the match nor its place shows in the time
    matches = [hmac.compare_digest(sent, token.encode()) for token in tokens]
    return any(matches)


async def _answer(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode() + b"\n"
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


@dataclass
class _Seen:
    """What the access log says of one request (never its arguments, evidence or token)."""

    status: int = 0
    body: bytearray | None = None

    def call(self) -> tuple[str, str, str]:
        """The JSON-RPC method, the tool (or resource, prompt) and the process id named."""
        try:
            message = json.loads(bytes(self.body or b""))
        except ValueError:
            return "-", "-", "-"
        if not isinstance(message, dict):
            return "batch" if isinstance(message, list) else "-", "-", "-"
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        assert isinstance(arguments, dict)
        named = params.get("name") or params.get("uri") or "-"
        process = arguments.get("processId") or "-"
        return str(message.get("method") or "-")[:100], str(named)[:100], str(process)[:200]


class Gate:
    """The layer around the SDK's app: health, tokens, bounds, the access log. A request for
    `options.path` goes straight to `endpoint`, the SDK's handler of that path (default: the
    app), past the app's routing; anything else (the lifespan, another path) to the app."""

    def __init__(
        self, app: App, service: TodoService, options: HttpOptions, endpoint: App | None = None
    ) -> None:
        self.app, self.service, self.options = app, service, options
        self.endpoint = endpoint or app
        self.in_flight = 0
        self.not_ready: str | None = None  # the last reason logged, to log a change only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # the lifespan: the SDK's session manager
            return
        seen, started = _Seen(), time.monotonic()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen.status = message["status"]
            await send(message)

        try:
            await self._route(scope, self._teed(receive, seen), sending)
        finally:
            self._log(scope, seen, time.monotonic() - started)

    def _teed(self, receive: Receive, seen: _Seen) -> Receive:
        """`receive`, keeping the body (up to the limit) for the access log's method and tool."""

        async def tee() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen.body = seen.body if seen.body is not None else bytearray()
                if len(seen.body) + len(message.get("body", b"")) <= self.options.max_body:
                    seen.body.extend(message.get("body", b""))
            return message

        return tee

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if path == "/healthz" and scope["method"] == "GET":
            await _answer(send, 200, {"status": "ok"}, [])
        elif path == "/readyz" and scope["method"] == "GET":
            await self._readyz(send)
        elif self.options.tokens and not authorized(scope, self.options.tokens):
            await self._unauthorized(scope, send)
        elif self.in_flight >= self.options.max_in_flight:
            busy = {"error": f"busy: {self.options.max_in_flight} requests in flight; retry"}
            await _answer(send, 503, busy, [(b"retry-after", b"1")])
        else:
            self.in_flight += 1
            try:
                await self._within_deadline(scope, receive, send)
            finally:
                self.in_flight -= 1

    async def _unauthorized(self, scope: Scope, send: Send) -> None:
        challenge = 'Bearer realm="todoflow"'
        if authorized(scope, self.options.tokens) is False:
            challenge += ', error="invalid_token"'
        body = {"error": "unauthorized: send `Authorization: Bearer <token>`"}
        await _answer(send, 401, body, [(b"www-authenticate", challenge.encode())])

    async def _within_deadline(self, scope: Scope, receive: Receive, send: Send) -> None:
        import anyio

        answered = False

        async def sending(message: Message) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        app = self.endpoint if scope.get("path") == self.options.path else self.app
        with anyio.move_on_after(self.options.deadline) as scope_of_call:
            await app(scope, receive, sending)
        if scope_of_call.cancelled_caught and not answered:
            # the step may still finish (one transaction, one append): sent again, it answers `replayed`
            late = {"error": f"no answer within {self.options.deadline:g} s; send the same call again"}
            await _answer(send, 504, late, [])

    async def _readyz(self, send: Send) -> None:
        import anyio

        reason: str | None = f"the store did not answer within {READY_WITHIN:g} s"
        with anyio.move_on_after(READY_WITHIN):
            reason = await anyio.to_thread.run_sync(self.service.runs.ready, abandon_on_cancel=True)
        if reason != self.not_ready and reason is not None:
            print(f"todoflow serve: not ready: {reason}", file=sys.stderr, flush=True)
        self.not_ready = reason
        await _answer(send, 503 if reason else 200, {"status": "not ready" if reason else "ready"}, [])

    def _log(self, scope: Scope, seen: _Seen, took: float) -> None:
        method, named, process = seen.call()
        line = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "http": scope.get("method", "-"),
            "path": scope.get("path", "-")[:200],
            "method": method,
            "tool": named,
            "processId": process,
            "status": seen.status,
            "ms": round(took * 1000, 1),
            "pid": os.getpid(),  # which worker answered (`--workers`)
        }
        if self.options.log_format == "json":
            text = json.dumps(line, ensure_ascii=False)
        else:
            text = " ".join(str(value) for value in line.values())
        print(text, file=sys.stderr, flush=True)


def http_app(server: Any, service: TodoService, options: HttpOptions) -> App:
    """The ASGI app: the SDK's stateless Streamable HTTP app for `server`, in our gate. The
    gate hands a call to the app's one MCP route, the session manager's handler, itself:
    the app's middleware and router cost the event loop 0.05-0.1 ms a request
    (docs/performance.md, "Over HTTP"); the app still runs the session manager's lifespan
    and answers any other path (404, the redirect of `/mcp/`)."""
    app = server.streamable_http_app(
        streamable_http_path=options.path,
        json_response=True,
        stateless_http=True,
        max_request_body_size=options.max_body,
        host=options.host,
    )
    return Gate(app, service, options, endpoint=server.session_manager.handle_request)


async def serve_http(server: Any, service: TodoService, options: HttpOptions) -> None:
    """Serve until SIGTERM or SIGINT, then drain: uvicorn stops listening, answers what is
    in flight (at most `options.drain` seconds), and the caller closes the runs."""
    import uvicorn

    class Draining(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            worker = "" if options.fd is None else f" (worker {os.getpid()})"
            for bound in self.servers[0].sockets if self.servers else ():
                host, port = bound.getsockname()[:2]  # the port the system gave, for `:0`
                served = url(host, port, options)
                print(f"todoflow serve: MCP over HTTP at {served}{worker}", file=sys.stderr, flush=True)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                yield
                self._captured_signals.clear()  # drained: a clean exit (0), not death by the signal

    inherited = None if options.fd is None else [socket.socket(fileno=options.fd)]
    await Draining(server_config(http_app(server, service, options), options)).serve(inherited)


def server_config(app: App, options: HttpOptions) -> uvicorn.Config:
    """uvicorn's settings for `app`: where it listens, how long SIGTERM drains, no logging
    of its own, and the HTTP parser."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        http=PARSER,
        log_config=None,  # the logging the SDK set up: warnings and errors, on stderr
        log_level="warning",
        access_log=False,  # ours, without tokens: `Gate._log`
        timeout_graceful_shutdown=options.drain,
        lifespan="on",
    )


def url(host: str, port: int, options: HttpOptions) -> str:
    """The endpoint's URL at `host`:`port`, as stderr says it."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{options.path}"
