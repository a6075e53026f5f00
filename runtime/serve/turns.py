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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import anyio

T = TypeVar("T")


class _Run:
    """A run's FIFO lock (anyio's `Lock` hands itself to its waiters in the order they
    came) and how many calls of the run are in or waiting."""

    __slots__ = ("lock", "users")

    def __init__(self, lock: anyio.Lock) -> None:
        self.lock, self.users = lock, 0


class Turns:
    """The runs with a call in or waiting, each with its lock."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    async def run(self, run: Any, work: Callable[[], T]) -> T:
        """`work()` on a worker thread, after the earlier calls of `run` (a process id as
        sent; anything but a string is no run's, for the tool to refuse)."""
        import anyio  # the `mcp` extra's, as the SDK is
        import anyio.to_thread

        if not isinstance(run, str):
            return await anyio.to_thread.run_sync(work)
        found = self._runs.get(run)
        if found is None:  # a free lock is taken without a turn of the loop
            found = self._runs[run] = _Run(anyio.Lock(fast_acquire=True))
        found.users += 1
        try:
            async with found.lock:
                return await anyio.to_thread.run_sync(work)
        finally:
            found.users -= 1
            if not found.users:
                del self._runs[run]

    def __len__(self) -> int:
        """The runs with a call in or waiting."""
        return len(self._runs)
