"""A small MCP server for the tests of the LLM agent's MCP toolset: tickets in memory.

Run as a program: `python mcp_tickets.py [stdio|http PORT]`. Its tools: `open_ticket`
(returns the new ticket's id), `get_ticket` (a tool error, as a server reports one, for a
ticket it does not have), `echo_env` and `echo_header` (a variable of its environment, a
header of the HTTP request: to show what it was given).
"""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("tickets")
TICKETS: dict[str, str] = {}


@server.tool()
def open_ticket(title: str) -> str:
    """Open a ticket with a title; returns its id."""
    ticket = f"T-{len(TICKETS) + 1}"
    TICKETS[ticket] = title
    return ticket


@server.tool()
def get_ticket(ticket: str) -> str:
    """A ticket's title."""
    if ticket not in TICKETS:
        raise ToolError(f"no ticket {ticket}")
    return TICKETS[ticket]


@server.tool()
def echo_env(name: str) -> str:
    """A variable of the server's environment, or `unset`."""
    return os.environ.get(name, "unset")


@server.tool()
def echo_header(name: str, ctx: Context) -> str:
    """A header of the request that called this tool (over HTTP), or `unset`."""
    return (ctx.headers or {}).get(name.lower(), "unset")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run("stdio")
