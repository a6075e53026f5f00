"""stdin and stdout as the event loop's own non-blocking pipes, for `todoflow serve`.

The SDK's stdio transport reads each line and writes and flushes each answer on a worker
thread (anyio's file wrapper), and passes each message through a task and a stream on
each side: three thread hand-offs and two task switches a call, each costing the event
loop — the one thread every call of a server shares. Where stdin and stdout are pipes or
sockets (as an MCP client starts a server), the server reads its messages from stdin
and writes its answers to stdout itself, on the event loop; anything else (a terminal, a
file) keeps the SDK's way, since making a terminal non-blocking would reach the shell
that shares it.

As the SDK does, the wire is served from private copies of the descriptors while fd 0
reads the null device and fd 1 writes to stderr, so what a tool or a child process
prints cannot tear a message; both are put back at the end.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import IO, Any, Self

CHUNK = 1 << 16
Refuse = Callable[[Exception], Awaitable[None]]  # answers a line that is not a message


class Closing:
    """A stream that is its own async context, as the SDK enters the streams it is given:
    leaving it is `aclose`."""

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class Receiving(Closing):
    """A stream read with `receive` (anyio's `EndOfStream` at its end), iterated as the
    SDK's server iterates its read stream."""

    async def receive(self) -> Any:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Inbox(Receiving):
    """The messages read from stdin, as the SDK's stdio transport reads them (each line
    UTF-8, what is not replaced, validated as a JSON-RPC message), handed to the server as
    it asks for them: no task and no stream in between. A line that is not a message goes
    to `refuse` and the next one is read."""

    last_context = None  # no sender's context: the lines come from the wire

    def __init__(self, reader: asyncio.StreamReader, refuse: Callable[[Exception], Awaitable[None]]) -> None:
        self._reader, self._refuse = reader, refuse
        self._lines: deque[bytes] = deque()
        self._rest: bytes | None = b""  # None: stdin has ended

    async def _line(self) -> bytes | None:
        while not self._lines:
            if self._rest is None:
                return None
            chunk = await self._reader.read(CHUNK)
            if not chunk:
                last, self._rest = self._rest, None
                return last or None
            *lines, self._rest = (self._rest + chunk).split(b"\n")
            self._lines.extend(lines)
        return self._lines.popleft()

    async def receive(self) -> Any:
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        while (line := await self._line()) is not None:
            try:
                message = types.jsonrpc_message_adapter.validate_json(
                    line.decode("utf-8", errors="replace"), by_name=False
                )
            except Exception as error:  # what the SDK's transport hands on as an error, too
                await self._refuse(error)
                continue
            return SessionMessage(message)
        raise anyio.EndOfStream


class Outbox(Closing):
    """stdout: each message written as one line, at once; `send` returns when the pipe
    has room again (a client reading slower than the server answers)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, message: Any) -> None:
        line = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        self._writer.write(line.encode("utf-8"))
        await self._writer.drain()


@asynccontextmanager
async def claimed(refuse: Refuse) -> AsyncIterator[tuple[Inbox, Outbox] | None]:
    """The messages read from stdin and the stream they are answered on, both on the
    event loop, or None where stdin and stdout are not both pipes or sockets."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    kept = os.dup(0), os.dup(1)  # the wire, put back on fd 0 and 1 at the end
    wire = os.fdopen(os.dup(0), "rb", buffering=0), os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        async with _streams(wire[0], wire[1], refuse) as streams:
            yield streams
    finally:
        for fd, original in enumerate(kept):
            os.set_blocking(original, True)  # the loop made the wire non-blocking
            os.dup2(original, fd)
            os.close(original)
        for file in wire:
            file.close()


@asynccontextmanager
async def _streams(
    stdin: IO[bytes], stdout: IO[bytes], refuse: Refuse
) -> AsyncIterator[tuple[Inbox, Outbox]]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    read_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    try:
        write_pipe, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), stdout
        )
        try:
            yield Inbox(reader, refuse), Outbox(asyncio.StreamWriter(write_pipe, protocol, None, loop))
        finally:
            write_pipe.close()
    finally:
        read_pipe.close()
