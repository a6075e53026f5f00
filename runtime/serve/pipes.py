"""stdin and stdout as the event loop's own non-blocking pipes, for `todoflow serve`.

The SDK's stdio transport reads each line and writes and flushes each answer on a worker
thread (anyio's file wrapper): three thread hand-offs a call, each costing the event
loop — the one thread every call of a server shares — more than a tool's own hand-off.
Where stdin and stdout are pipes or sockets (as an MCP client starts a server), they are
read and written by the event loop itself; anything else (a terminal, a file) keeps the
SDK's way, since making a terminal non-blocking would reach the shell that shares it.

As the SDK does, the wire is served from private copies of the descriptors while fd 0
reads the null device and fd 1 writes to stderr, so what a tool or a child process
prints cannot tear a message; both are put back at the end.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO

CHUNK = 1 << 16


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Lines:
    """stdin's lines, as text (UTF-8, what is not replaced), as the SDK reads them."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        rest = b""
        while chunk := await self._reader.read(CHUNK):
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace")
        if rest:
            yield rest.decode("utf-8", errors="replace")


class Answers:
    """stdout: `write` queues a message, `flush` waits while the client reads slower than
    the server answers."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def claimed() -> AsyncIterator[tuple[Lines, Answers] | None]:
    """stdin's lines and stdout's writer on the event loop, or None where they are not
    both pipes or sockets."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    kept = os.dup(0), os.dup(1)  # the wire, put back on fd 0 and 1 at the end
    wire: list[IO[bytes]] = [os.fdopen(os.dup(0), "rb", buffering=0), os.fdopen(os.dup(1), "wb", buffering=0)]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        async with _streams(*wire) as streams:
            yield streams
    finally:
        for fd, original in enumerate(kept):
            os.set_blocking(original, True)  # the loop made the wire non-blocking
            os.dup2(original, fd)
            os.close(original)
        for file in wire:
            file.close()


@asynccontextmanager
async def _streams(stdin: IO[bytes], stdout: IO[bytes]) -> AsyncIterator[tuple[Lines, Answers]]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    read_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    try:
        write_pipe, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), stdout
        )
        try:
            yield Lines(reader), Answers(asyncio.StreamWriter(write_pipe, protocol, None, loop))
        finally:
            write_pipe.close()
    finally:
        read_pipe.close()
