"""`todoflow serve`: the service behind the MCP tools, its transports, the fast path's
handoff to a client, and the built-in workflows."""
