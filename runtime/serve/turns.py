"""One call at a time per run, in the order the calls arrived, while calls for different
runs overlap: a tool's work (the journal's write and sync, file reads, a database's round
trips) runs on a worker thread, off the event loop, after its run's earlier calls.

The order is taken on the event loop, where the transport hands the calls over one by
one, so it is their arrival order; a worker thread could not know it. A call cancelled
while it waits (its client went away, a deadline) leaves the queue having changed
nothing; one cancelled while its work runs lets the work finish (a step is never half
applied) and keeps its run's turn until then: the next status, or the same call sent
again, says what it did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import anyio

T = TypeVar("T")


class Turns:
    """A FIFO lock per run (anyio's `Lock` hands itself to its waiters in order), kept
    only while a call of the run is in or waiting."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[anyio.Lock, int]] = {}

    @asynccontextmanager
    async def turn(self, run: str) -> AsyncIterator[None]:
        import anyio  # the `mcp` extra's, as the SDK is

        lock, users = self._runs.get(run) or (
            anyio.Lock(fast_acquire=True),
            0,
        )  # a free lock: taken without a turn of the loop
        self._runs[run] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._runs[run]
            if users == 1:
                del self._runs[run]
            else:
                self._runs[run] = (lock, users - 1)

    async def run(self, run: Any, work: Callable[[], T]) -> T:
        """`work()` on a worker thread, after the earlier calls of `run` (a process id as
        sent; anything but a string is no run's, for the tool to refuse)."""
        import anyio.to_thread

        if not isinstance(run, str):
            return await anyio.to_thread.run_sync(work)
        async with self.turn(run):
            return await anyio.to_thread.run_sync(work)

    def __len__(self) -> int:
        """The runs with a call in or waiting."""
        return len(self._runs)
