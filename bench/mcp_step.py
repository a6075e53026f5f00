"""MCP round trip: a `step` (one confirmation, durable) through the official client and the
real server over stdio, against a no-op tool call on the same server, in one run.

    .venv/bin/python -m bench.mcp_step
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from bench.measure import Figure, report
from bench.scratch import scratch

TASKS = 100
ROUNDS = 5


async def rounds() -> list[Figure]:
    with scratch() as runs:
        params = StdioServerParameters(command=sys.executable, args=["-m", "bench.mcp_server", str(runs)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()

            async def call(tool: str, **arguments: Any) -> dict[str, Any]:
                result = await session.call_tool(tool, arguments)
                assert not result.is_error, result.content
                assert result.structured_content is not None
                return result.structured_content

            ready = [{"action": f"Task {i}", "expected_result": f"Task {i} checked"} for i in range(TASKS)]
            prepared = await call(
                "start", action="prepare", workflowId="todo-list", parentExecutionId="bench", tasks=ready
            )
            directive = await call("start", action="execute", startAttemptId=prepared["startAttemptId"])
            directive = await call(
                "step",
                processId=directive["processId"],
                attemptId=directive["attemptId"],
                tasks=ready,
                progress_checklist_outcome="ready",
            )
            figure = Figure(
                "`step` round trip (a durable confirmation)",
                "no-op tool call, same server",
                target="<= 1.3",
                unit="ms",
            )
            per_round = TASKS // ROUNDS
            for round_ in range(ROUNDS):
                steps, noops = [], []
                for i in range(round_ * per_round, (round_ + 1) * per_round):  # interleaved
                    start = time.perf_counter()
                    await call("noop")
                    noops.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    directive = await call(
                        "step",
                        processId=directive["processId"],
                        attemptId=directive["attemptId"],
                        evidence=f"checked task {i}",
                        progress_execution_outcome=f"task {i} done",
                    )
                    steps.append(time.perf_counter() - start)
                figure.add(statistics.median(steps), statistics.median(noops))
            assert directive["completed"]
    report(f"mcp ({TASKS // ROUNDS} calls of each a round)", [figure], ROUNDS)
    return [figure]


def main() -> list[Figure]:
    return anyio.run(rounds)


if __name__ == "__main__":
    main()
