"""The workspace tools' cost: a `write_file` and a `read_file` call of the LLM agent's
toolset (`WorkspaceTools.call`: arguments validated, path confined) against a bare
`open().write()` and `open().read()` of the same file, call by call, in the same run.

The tool does more than the bare calls, on purpose: it confines the path (symlinks, hard
links, devices, FIFOs refused), replaces the file atomically (a temporary file and a
rename), hashes what it wrote for the audit, and numbers the lines it reads. So a write
is measured against its floor too: the same atomic replace done with bare `os` calls.
The bare read is a text read (`open(path, encoding="utf-8").read()`: decoding is part of
it); a read from the middle of the file (the worst case: the lines before it are skipped)
is set against the same bare read of the whole file.

    .venv/bin/python -m bench.tools
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.measure import Figure, report
from bench.scratch import scratch
from todoflow.runtime.agents.workspace_tools import WorkspaceTools

ROUNDS, CALLS = 7, 200
# (bytes, characters a line): a small source file; a typical one; one read_file cuts at
# its 2,000-line bound (what lies past it is not shown)
SIZES = {"1 KB": (1024, 80), "64 KB": (64 * 1024, 80), "256 KB, 40-character lines": (256 * 1024, 40)}


def _interleaved(bare: Callable[[], object], tool: Callable[[], object]) -> tuple[float, float]:
    """Seconds of a call of each, the two called turn by turn so a slow spell of the
    machine falls on both: the median call of each (a call the scheduler preempted, on
    this shared machine, is not what a call costs)."""
    spent: tuple[list[float], list[float]] = ([], [])
    for _ in range(CALLS):
        for side, action in enumerate((bare, tool)):
            start = time.perf_counter()
            action()
            spent[side].append(time.perf_counter() - start)
    return statistics.median(spent[1]), statistics.median(spent[0])


def _bare(path: str, text: str) -> tuple[Callable[[], object], Callable[[], object]]:
    def write() -> None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)

    def read() -> str:
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    return write, read


def _replace(path: str, text: str) -> Callable[[], object]:
    """The floor of an atomic write: a new file beside, written, renamed over the old."""
    data, temporary = text.encode(), f"{path}.new"

    def replace() -> None:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.write(handle, data)
        os.close(handle)
        os.replace(temporary, path)

    return replace


def _tool(
    tools: WorkspaceTools, name: str, text: str
) -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    """write_file, read_file from the top and read_file from the file's middle line."""
    deadline, middle = time.monotonic() + 3600, text.count("\n") // 2 + 1

    def write() -> object:
        return tools.call("write_file", {"path": name, "content": text}, deadline)

    def read() -> object:
        return tools.call("read_file", {"path": name}, deadline)

    def read_middle() -> object:
        return tools.call("read_file", {"path": name, "offset": middle}, deadline)

    return write, read, read_middle


def measure(folder: Path, label: str, size: int, width: int) -> list[Figure]:
    """write_file and read_file of a file of `size` bytes (lines of `width` characters), against
    the bare calls on the same file."""
    text = ("x" * (width - 1) + "\n") * (size // width)
    name = f"file-{size}.txt"
    bare_write, bare_read = _bare(f"{folder}/{name}", text)
    tool_write, tool_read, tool_middle = _tool(WorkspaceTools(folder), name, text)
    write = Figure(f"write_file, {label}", "bare open().write(), same file", target="<= 1.2")
    floor = Figure(f"write_file, {label}, against its floor", "bare os.open/write/replace, same file")
    read = Figure(f"read_file, {label}", "bare open().read() (text), same file", target="<= 1.2")
    middle = Figure(f"read_file from the middle line, {label}", "bare open().read() (text), same file")
    tool_write()
    for _ in range(ROUNDS):
        write.add(*_interleaved(bare_write, tool_write))
        floor.add(*_interleaved(_replace(f"{folder}/{name}", text), tool_write))
        read.add(*_interleaved(bare_read, tool_read))
        middle.add(*_interleaved(bare_read, tool_middle))
    return [write, floor, read, middle]


def main() -> list[Figure]:
    figures: list[Figure] = []
    with scratch() as folder:
        for label, (size, width) in SIZES.items():
            figures += measure(folder, label, size, width)
    report(f"workspace tools ({CALLS} calls of each a round, interleaved; the median call)", figures, ROUNDS)
    return figures


if __name__ == "__main__":
    main()
