"""The MCP servers a workflow's configuration names, as a `Toolset` for the LLM agent.

`todoflow.toml`'s `[mcp.servers.<name>]` tables are read by `parse_servers` into typed
values: a stdio server (`command`, `args`, `env`) or a Streamable HTTP one (`url`,
`headers`), `${VAR}` taken from the environment. `McpToolset` starts them once per run
(`start()`, the pre-flight, or the first `specs()`), lists their tools once, offers each
as `mcp__<server>__<tool>` with the server's own description and input schema, calls
them, and closes them when the run stops.

The `mcp` SDK's client is async; the agent is not. The sessions live on one event loop
in a thread of their own, each held open by one task (anyio's cancel scopes must be
left by the task that entered them), and the agent waits for a call up to its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar, cast

from todoflow.dsl.diagnostics import TodoflowError

from ..entries import keep
from .toolbox import ToolOutcome, ToolSpec

PREFIX = "mcp"
STARTUP_S = 60.0  # a server not initialized and listed by then is a pre-flight error
CALL_S = 120.0  # a call the server does not answer by then is an error result
CLOSE_S = 5.0  # how long a server may take to exit before its task is cancelled
MAX_RESULT = 256 * 1024  # characters of a tool's result given to the model
NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
OPENAI_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what a Chat Completions tool may be named
STDIO_KEYS = ("command", "args", "env")
HTTP_KEYS = ("url", "headers")
T = TypeVar("T")


class McpError(TodoflowError):
    """An MCP server that cannot be configured, started or listed, said before a run starts."""


@dataclass(frozen=True)
class StdioServer:
    name: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    cwd: Path  # the configuration's folder: relative `command` and `args` are read from there


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str
    headers: Mapping[str, str] = field(repr=False)  # a token may be in them: never shown


McpServer = StdioServer | HttpServer


# -- the configuration -------------------------------------------------------------------


def parse_servers(
    table: Mapping[str, Any], where: Path, environ: Mapping[str, str] = os.environ
) -> tuple[McpServer, ...]:
    """The servers of a configuration's `[mcp]` table (`where`: the file it was read
    from). Every problem is said at once, in one `McpError`."""
    problems = [f"[mcp] has no key `{key}`; the key is `servers`" for key in table if key != "servers"]
    servers: list[McpServer] = []
    listed = table.get("servers", {})
    if not isinstance(listed, Mapping):
        problems.append("[mcp.servers] is a table of servers, `[mcp.servers.NAME]`")
        listed = {}
    for name, fields in listed.items():
        server, wrong = _server(name, fields, where.parent, environ)
        problems += wrong
        if server is not None:
            servers.append(server)
    if problems:
        raise McpError(f"{where}:\n  " + "\n  ".join(problems))
    return tuple(servers)


def _server(
    name: str, fields: Any, folder: Path, environ: Mapping[str, str]
) -> tuple[McpServer | None, list[str]]:
    at = f"[mcp.servers.{name}]"
    if not NAME.fullmatch(name):
        return None, [f"{at}: a server's name is 1-40 letters, digits, `_` or `-`"]
    if not isinstance(fields, Mapping):
        return None, [f"{at} is a table: `command` (stdio) or `url` (Streamable HTTP)"]
    if ("command" in fields) == ("url" in fields):
        return None, [f"{at}: give `command` (a stdio server) or `url` (a Streamable HTTP server)"]
    known = STDIO_KEYS if "command" in fields else HTTP_KEYS
    problems = [
        f"{at} has no key `{key}`; the keys are {', '.join(f'`{k}`' for k in known)}"
        for key in fields
        if key not in known
    ]
    values = _Expanded(at, environ, problems)
    if "command" in fields:
        server: McpServer = StdioServer(
            name,
            values.text(fields, "command"),
            tuple(values.texts(fields, "args")),
            values.table(fields, "env"),
            folder,
        )
    else:
        server = HttpServer(name, values.text(fields, "url"), values.table(fields, "headers"))
    return (None if problems else server), problems


@dataclass
class _Expanded:
    """A server's values, `${VAR}` replaced from the environment; problems collected."""

    at: str
    environ: Mapping[str, str]
    problems: list[str]

    def text(self, fields: Mapping[str, Any], key: str) -> str:
        value = fields.get(key)
        if not isinstance(value, str) or not value:
            self.problems.append(f"{self.at} {key} is a non-empty string")
            return ""
        return self._expand(value, key)

    def texts(self, fields: Mapping[str, Any], key: str) -> list[str]:
        value = fields.get(key, [])
        if not isinstance(value, list) or not all(isinstance(each, str) for each in value):
            self.problems.append(f"{self.at} {key} is a list of strings")
            return []
        return [self._expand(each, key) for each in value]

    def table(self, fields: Mapping[str, Any], key: str) -> dict[str, str]:
        value = fields.get(key, {})
        if not isinstance(value, Mapping) or not all(isinstance(each, str) for each in value.values()):
            self.problems.append(f"{self.at} {key} is a table of strings")
            return {}
        # env and headers are where tokens go: what a `${VAR}` brings there is a secret
        return {name: self._expand(each, f"{key}.{name}", secret=True) for name, each in value.items()}

    def _expand(self, value: str, key: str, secret: bool = False) -> str:
        def variable(match: re.Match[str]) -> str:
            found = self.environ.get(match[1])
            if found is None:
                self.problems.append(f"{self.at} {key} names ${{{match[1]}}}, which is not set")
                return ""
            if secret:
                keep(found)  # a server or a model that echoes it must not put it in the journal
            return found

        return VARIABLE.sub(variable, value)


# -- the toolset -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tool:
    server: str
    name: str  # the server's own name for it
    spec: ToolSpec


class McpToolset:
    """The tools of `servers`, named `mcp__<server>__<tool>`; a `Toolset`."""

    def __init__(self, servers: tuple[McpServer, ...], startup_s: float = STARTUP_S) -> None:
        self.servers, self.startup_s = servers, startup_s
        self._loop: _Loop | None = None
        self._sessions: dict[str, _Held] = {}
        self._tools: dict[str, _Tool] = {}
        self._started = False

    def start(self) -> None:
        """Starts every server and lists its tools (once): the pre-flight. A server that
        does not start or list is named in the `McpError`, and none is left running."""
        if self._started or not self.servers:
            self._started = True
            return
        _needs_sdk()
        self._loop = _Loop()
        opened = self._loop.run(_open_all(self.servers, self.startup_s), None)
        problems = []
        for server, held in zip(self.servers, opened, strict=True):
            if isinstance(held, _Held):
                self._sessions[server.name] = held
            else:
                problems.append(f"MCP server `{server.name}` {held}")
        if problems:
            self.close()
            raise McpError("\n".join(problems) + "\n(run without MCP servers with --no-mcp)")
        self._tools = _named(self._sessions)
        self._started = True

    def specs(self) -> tuple[ToolSpec, ...]:
        self.start()
        return tuple(tool.spec for tool in self._tools.values())

    def call(self, name: str, arguments: Mapping[str, Any], deadline: float) -> ToolOutcome:
        tool = self._tools.get(name)
        if tool is None or self._loop is None:
            return ToolOutcome(f"refused: there is no MCP tool `{name}`", refused=True)
        held = self._sessions[tool.server]
        detail: dict[str, str | int] = {"server": tool.server, "tool": tool.name}
        left = min(deadline - time.monotonic(), CALL_S)
        late = ToolOutcome(
            f"error: MCP server `{tool.server}` did not answer in {max(left, 0):.0f} s", detail=detail
        )
        if left <= 0:
            return late
        try:
            result = self._loop.run(held.session.call_tool(tool.name, dict(arguments)), left)
        except TimeoutError:
            return late
        except Exception as error:  # the session's: a server gone, a protocol error
            return ToolOutcome(f"error: MCP server `{tool.server}` failed: {_said(error)}", detail=detail)
        text = _cut(_result_text(result))
        if result.is_error:
            return ToolOutcome(f"error: {text}", detail=detail | {"error": 1})
        return ToolOutcome(text, detail=detail)

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(Exception):
            loop.run(_close_all(list(self._sessions.values())), CLOSE_S * 2)
        self._sessions = {}
        loop.stop()


def _needs_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpError("MCP servers need the mcp package: pip install 'todoflow[mcp]'") from None


def _named(sessions: Mapping[str, _Held]) -> dict[str, _Tool]:
    """Each server's tools under the name the model calls (`mcp__<server>__<tool>`); a
    tool whose name no Chat Completions tool may have is left out."""
    tools: dict[str, _Tool] = {}
    for server, held in sessions.items():
        for listed in held.tools:
            name = f"{PREFIX}__{server}__{listed.name}"
            if OPENAI_NAME.fullmatch(name) and name not in tools:
                spec = ToolSpec(name, listed.description or listed.name, listed.input_schema)
                tools[name] = _Tool(server, listed.name, spec)
    return tools


def _result_text(result: Any) -> str:
    parts = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{block.type} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _cut(text: str) -> str:
    if len(text) <= MAX_RESULT:
        return text
    return text[:MAX_RESULT] + f"\n[cut: the result has {len(text):,} characters; {MAX_RESULT:,} are shown]"


def _said(error: BaseException) -> str:
    """An error's own words; an exception group (anyio's task groups) by its first leaf."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__


# -- the event loop and the sessions -----------------------------------------------------


class _Loop:
    """An asyncio loop in a daemon thread; `run` waits for a coroutine, at most `timeout` s."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="todoflow-mcp", daemon=True)
        self.thread.start()

    def run(self, coroutine: Awaitable[T], timeout: float | None) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(_within(coroutine, timeout), self.loop)
        return future.result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CLOSE_S)
        if not self.thread.is_alive():
            self.loop.close()


async def _within(coroutine: Awaitable[T], timeout: float | None) -> T:
    return await asyncio.wait_for(coroutine, timeout)


@dataclass
class _Held:
    """An open session, the task holding it and the event that lets it close."""

    session: Any  # mcp.ClientSession
    tools: list[Any]  # mcp_types.Tool
    task: asyncio.Task[None]
    stop: asyncio.Event


async def _open_all(servers: tuple[McpServer, ...], startup_s: float) -> list[_Held | str]:
    return list(await asyncio.gather(*(_open(server, startup_s) for server in servers)))


async def _open(server: McpServer, startup_s: float) -> _Held | str:
    """The server started and listed, or why not (in words)."""
    opened: asyncio.Future[tuple[Any, list[Any]]] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as file:
        errlog = cast(TextIO, file)  # the server's stderr, to say why it failed
        task = asyncio.create_task(_hold(server, opened, stop, errlog))
        try:
            session, tools = await asyncio.wait_for(asyncio.shield(opened), startup_s)
        except TimeoutError:
            task.cancel()
            return f"did not start and list its tools in {startup_s:.0f} s{_stderr(errlog)}"
        except Exception as error:
            return f"did not start: {_said(error)}{_stderr(errlog)}"
    return _Held(session, tools, task, stop)


async def _hold(server: McpServer, opened: asyncio.Future[Any], stop: asyncio.Event, errlog: TextIO) -> None:
    """Opens the session, lists the tools, and keeps it open until `stop` is set."""
    from mcp import ClientSession

    try:
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(_transport(server, errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            opened.set_result((session, await _list(session)))
            await stop.wait()
    except Exception as error:
        if not opened.done():
            opened.set_exception(error)


async def _list(session: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        from mcp.types import PaginatedRequestParams

        listed = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += listed.tools
        cursor = listed.next_cursor
        if not cursor:
            return tools


def _transport(server: McpServer, errlog: TextIO) -> contextlib.AbstractAsyncContextManager[Any]:
    if isinstance(server, StdioServer):
        from mcp import StdioServerParameters, stdio_client

        parameters = StdioServerParameters(
            command=server.command, args=list(server.args), env=dict(server.env), cwd=server.cwd
        )
        return stdio_client(parameters, errlog=errlog)
    return _http(server)


@contextlib.asynccontextmanager
async def _http(server: HttpServer) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults for its client
    async with (
        httpx2.AsyncClient(headers=dict(server.headers), timeout=timeout) as client,
        streamable_http_client(server.url, http_client=client) as streams,
    ):
        yield streams


def _stderr(errlog: TextIO) -> str:
    """The end of what a stdio server wrote on stderr before it failed, if anything."""
    errlog.flush()
    errlog.seek(0)
    said = errlog.read().strip()
    return "; its stderr ends:\n    " + "\n    ".join(said[-1500:].splitlines()[-12:]) if said else ""


async def _close_all(held: list[_Held]) -> None:
    for each in held:
        each.stop.set()
    tasks = [each.task for each in held]
    if tasks:
        _, late = await asyncio.wait(tasks, timeout=CLOSE_S)
        for task in late:
            task.cancel()


def configured(folder: Path, file: Path | None = None) -> McpToolset:
    """The toolset of the MCP servers the configuration names (`file`, `--config`, or the
    one found from `folder`, a workflow's folder, as for the models); not started yet."""
    from .llm_config import find_config, read_config

    source = read_config(file) if file is not None else find_config(folder)
    return McpToolset(parse_servers(source.table.get("mcp", {}), source.path or folder / "todoflow.toml"))
