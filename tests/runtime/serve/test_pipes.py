"""stdin and stdout on the event loop (`serve`'s own pipes): lines read as the SDK reads
them. The served protocol over them: test_mcp.py, whose servers' stdio are pipes."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from todoflow.runtime.serve import pipes

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_stdin_lines_as_the_sdk_reads_them() -> None:
    reader = asyncio.StreamReader()
    for chunk in (b'{"a": 1}\n{"b"', b': "\xc3\xa9"}\r\n\xff\n', b"last"):
        reader.feed_data(chunk)
    reader.feed_eof()
    lines = [line async for line in pipes.Lines(reader)]
    assert lines == ['{"a": 1}', '{"b": "é"}\r', "\ufffd", "last"]


ECHO = """
import asyncio, os, sys
from todoflow.runtime.serve import pipes

async def main():
    async with pipes.claimed() as wire:
        lines, answers = wire
        print("stray output goes to stderr")  # fd 1 is not the wire while served
        async for line in lines:
            await answers.write(line.upper() + "\\n")
            await answers.flush()
    print("blocking" if os.get_blocking(0) and os.get_blocking(1) else "non-blocking", flush=True)

asyncio.run(main())
"""


def test_the_wire_is_served_apart_and_given_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ECHO], input=b"one\ntwo\n", capture_output=True, check=True, timeout=60
    )
    assert done.stdout == b"ONE\nTWO\nblocking\n"
    assert b"stray output goes to stderr" in done.stderr
