"""The todoflow MCP server plus a no-op tool, for bench/mcp_step.py to compare against,
served over stdio as `todoflow serve` serves."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from todoflow.runtime.serve.mcp import build_server, serve_stdio
from todoflow.runtime.serve.service import TodoService, Workflows


def main() -> None:
    service = TodoService(Workflows([]), Path(sys.argv[1]), Path())
    server = build_server(service)

    def noop() -> dict[str, bool]:
        """Does nothing: the cost of a tool call itself."""
        return {"ok": True}

    server.add_tool(noop, name="noop")
    anyio.run(serve_stdio, server)  # what `todoflow serve` runs


if __name__ == "__main__":
    main()
