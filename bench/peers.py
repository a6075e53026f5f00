"""The peers the benchmarks compare with: LangGraph with its SQLite checkpointer, the same
checklist walked as a graph. Installed with the `bench` dependency group
(`pip install --group bench`), never by the package; a benchmark says when it is missing.

The graph holds what our run holds: the checklist (each task's action and expected
result), the cursor, each task's result, the evidence of the last confirmation. One
confirmation is one `invoke` of a one-node graph on the run's thread: the node records
the result and moves the cursor, and the checkpointer saves the checkpoint (SQLite,
committed, in a file beside our run folders). Resuming is `get_state` of the thread
through a checkpointer opened for it, the compiled graph kept (a warm process).
"""

from __future__ import annotations

import contextlib
import importlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

MISSING = "LangGraph + SqliteSaver is not installed (pip install --group bench): its figures are left out"


def available() -> bool:
    try:
        importlib.import_module("langgraph.checkpoint.sqlite")
        importlib.import_module("langgraph.graph")
    except ImportError:
        return False
    return True


class Checklist(TypedDict):
    tasks: list[dict[str, str]]
    position: int
    results: list[str]
    evidence: str
    outcome: str


def _confirm(state: Checklist) -> dict[str, Any]:
    results = list(state["results"])
    index = (state["position"] - 1) % len(results)  # a long run walks the list again
    results[index] = state["outcome"]
    return {"position": state["position"] + 1, "results": results}


def graph() -> Any:
    """The checklist's graph, uncompiled: one node that confirms the current task."""
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(Checklist)
    builder.add_node("confirm", _confirm)
    builder.add_edge(START, "confirm")
    builder.add_edge("confirm", END)
    return builder


@contextlib.contextmanager
def saver(path: Path) -> Iterator[Any]:
    """A SqliteSaver on the database file `path`, its own connection, closed on leaving."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


class Thread:
    """A LangGraph thread walking a checklist of `tasks` tasks, checkpointed in `path`."""

    def __init__(self, path: Path, tasks: int, thread_id: str = "run") -> None:
        self.path, self.builder = path, graph()
        self.config: Any = {"configurable": {"thread_id": thread_id}}
        self._saver = saver(path)
        self.app = self.builder.compile(checkpointer=self._saver.__enter__())
        checklist = [{"action": f"Task {t}", "expected_result": f"Task {t} is checked"} for t in range(tasks)]
        start: Checklist = {
            "tasks": checklist,
            "position": 1,
            "results": ["Pending"] * tasks,
            "evidence": "",
            "outcome": "",
        }
        self.app.invoke(start, self.config)

    def confirm(self, index: int) -> None:
        """One confirmation: a step of the graph, checkpointed."""
        self.app.invoke({"evidence": f"checked task {index}", "outcome": f"task {index} done"}, self.config)

    def resume(self) -> Any:
        """The thread's state through a checkpointer opened for it (the graph compiled already)."""
        with saver(self.path) as opened:
            return self.app.copy({"checkpointer": opened}).get_state(self.config)

    def close(self) -> None:
        self._saver.__exit__(None, None, None)
