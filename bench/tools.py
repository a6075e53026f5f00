"""The workspace tools' cost: a `write_file` and a `read_file` call of the LLM agent's
toolset against a bare `os` write and read of the same file, in the same run, alternated
round by round so both see the same machine.

The tool does more than the bare calls, on purpose: it confines the path (symlinks, hard
links, devices refused), replaces the file atomically (a temporary file and a rename),
hashes what it wrote for the audit, and numbers the lines it reads.

    .venv/bin/python -m bench.tools
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.scratch import scratch
from todoflow.runtime.agents.workspace_tools import WorkspaceTools

ROUNDS, CALLS = 7, 300
SIZES = (1_000, 100_000)  # a small source file; a large one


def _per_call(action: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for index in range(CALLS):
        action(index)
    return (time.perf_counter() - start) / CALLS


def _bare(path: Path, text: str) -> tuple[Callable[[int], object], Callable[[int], object]]:
    def write(_: int) -> None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)

    def read(_: int) -> str:
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    return write, read


def _tool(
    tools: WorkspaceTools, name: str, text: str
) -> tuple[Callable[[int], object], Callable[[int], object]]:
    deadline = time.monotonic() + 3600

    def write(_: int) -> object:
        return tools.call("write_file", {"path": name, "content": text}, deadline)

    def read(_: int) -> object:
        return tools.call("read_file", {"path": name}, deadline)

    return write, read


def measure(folder: Path, size: int) -> dict[str, float]:
    """Median microseconds per call of each of the four, over ROUNDS alternated rounds."""
    text = ("x" * 79 + "\n") * (size // 80)
    tools = WorkspaceTools(folder)
    bare_write, bare_read = _bare(folder / "bare.txt", text)
    tool_write, tool_read = _tool(tools, "tool.txt", text)
    found: dict[str, list[float]] = {"bare write": [], "tool write": [], "bare read": [], "tool read": []}
    for _ in range(ROUNDS):
        found["bare write"].append(_per_call(bare_write))
        found["tool write"].append(_per_call(tool_write))
        found["bare read"].append(_per_call(bare_read))
        found["tool read"].append(_per_call(tool_read))
    return {name: statistics.median(values) * 1e6 for name, values in found.items()}


def main() -> None:
    print(f"workspace tools vs bare os calls ({CALLS} calls a round, median of {ROUNDS} rounds, µs per call)")
    with scratch() as folder:
        for size in SIZES:
            row = measure(folder, size)
            write = row["tool write"] / row["bare write"]
            read = row["tool read"] / row["bare read"]
            print(
                f"{size:>9,} bytes: write {row['bare write']:8.1f} -> {row['tool write']:8.1f} "
                f"({write:4.1f}x)"
                f"   read {row['bare read']:8.1f} -> {row['tool read']:8.1f} ({read:4.1f}x)"
            )


if __name__ == "__main__":
    main()
