"""stdin and stdout on the event loop (`serve`'s own pipes): messages read as the SDK
reads them, a line that is not one refused and the next read, the wire given back at
the end. The served protocol over them: test_mcp.py, whose servers' stdio are pipes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from todoflow.runtime.serve import pipes

from ...conftest import ROOT

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_messages_across_chunks_and_lines_that_are_not_messages() -> None:
    reader = asyncio.StreamReader()
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    for chunk in (
        ping[:10],
        ping[10:] + b"\r\n\xff\n\n",
        b'{"jsonrpc": "2.0", "id": "\xc3\xa9", "method": "ping"}',
    ):
        reader.feed_data(chunk)
    reader.feed_eof()
    refused: list[Exception] = []

    async def refuse(error: Exception) -> None:
        refused.append(error)

    ids = [message.message.id async for message in pipes.Inbox(reader, refuse)]
    assert ids == [1, "é"]  # the last line read without its newline, as the SDK reads it
    assert len(refused) == 2  # the invalid UTF-8 (replaced, then not JSON) and the empty line


ECHO = """
import asyncio, os
import mcp_types as types
from todoflow.runtime.serve import pipes

async def main():
    async def refuse(error):
        pass
    async with pipes.claimed(refuse) as (inbox, outbox):
        print("stray output goes to stderr")  # fd 1 is not the wire while served
        async for message in inbox:
            answer = types.JSONRPCResponse(jsonrpc="2.0", id=message.message.id, result={})
            await outbox.send(type(message)(answer))
    print("blocking" if os.get_blocking(0) and os.get_blocking(1) else "non-blocking", flush=True)

asyncio.run(main())
"""


def test_the_wire_is_served_apart_and_given_back() -> None:
    asked = b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}\n'
    done = subprocess.run(
        [sys.executable, "-c", ECHO], input=asked, capture_output=True, check=True, timeout=60
    )
    assert done.stdout == b'{"jsonrpc":"2.0","id":7,"result":{}}\nblocking\n'
    assert b"stray output goes to stderr" in done.stderr


def test_stdio_that_is_not_a_pipe_is_served_the_sdks_way_and_refuses_alike(tmp_path: Path) -> None:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    asked = tmp_path / "asked.jsonl"
    asked.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        + '\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        + '{"jsonrpc":"2.0","id":2,"method": nonsense\n'
    )
    answered = tmp_path / "answered.jsonl"
    with asked.open("rb") as stdin, answered.open("wb") as stdout:
        subprocess.run(
            [sys.executable, "-m", "todoflow", "serve", "--run-dir", str(tmp_path / "runs")],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=True,
            timeout=60,
        )
    answers = [json.loads(line) for line in answered.read_text().splitlines()]
    # the refusal is written before the next line is read; the calls' answers are not
    # waited for once stdin has ended (the SDK's way), so only it is certain
    assert [answer["error"]["code"] for answer in answers if answer["id"] is None] == [-32700]
