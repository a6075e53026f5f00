"""Runtime speed: the cost of one engine step, against floors measured in the same run.

1. 100-task runs and a 1,000-task run (10 steps x 100 tasks) with a scripted agent
   and the durable run folder, against the floor of appending one state-change line
   to a file and fsyncing it, per step, with no engine.
2. The engine with an in-memory store against bare python-statemachine transitions
   (the compiled workflow's StateChart driven by the same events).

    .venv/bin/python -m bench.runtime
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import todoflow
from bench import peers
from bench.measure import Figure, report, sync_latency
from bench.scratch import memory, scratch
from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.scripted import ScriptedAgent
from todoflow.runtime.definition import from_source
from todoflow.runtime.engine import Engine
from todoflow.runtime.store.memory import MemoryStore

ROUNDS = 7


def source(steps: int, tasks: int) -> str:
    out = ['workflow bench "Runtime benchmark" {']
    for s in range(steps):
        out.append(f'    todo_task s{s} "Step {s}" {{\n        tasks {{')
        out += [f'            "Task {t} of step {s}" => "Task {t} is checked"' for t in range(tasks)]
        out.append("        }\n    }")
    return "\n".join(out) + "\n}\n"


def replies(steps: int, tasks: int) -> list[dict[str, str]]:
    return [
        {"evidence": f"checked task {i}", "progress_execution_outcome": f"task {i} done"}
        for i in range(steps * tasks)
    ]


def prepared_run(folder: Path, steps: int, tasks: int, pid: str) -> tuple[Engine, ScriptedAgent]:
    """A new run of `steps` checklists of `tasks` tasks in `folder`, opened, and its script."""
    definition = from_source(source(steps, tasks), "bench.todoflow").or_raise()
    process.start(definition, folder / "runs", workspace=folder, process_id=pid).close()
    engine, _ = process.open_process(folder / "runs", pid)
    return engine, ScriptedAgent(replies(steps, tasks), folder)


def driven(engine: Engine, agent: ScriptedAgent) -> None:
    """The run driven to completion, and closed (its derived files brought up to date)."""
    outcome = drive(engine, agent, io.StringIO())
    engine.close()
    assert outcome == "complete", outcome


def durable_run(folder: Path, steps: int, tasks: int, runs: int = 1) -> tuple[float, int]:
    """`runs` processes of the workflow driven to completion: their time and their steps."""
    elapsed, entries = 0.0, 0
    for run in range(runs):
        engine, agent = prepared_run(folder, steps, tasks, f"bench-{steps}x{tasks}-{run}")
        start = time.perf_counter()
        driven(engine, agent)
        elapsed += time.perf_counter() - start
        entries += len(engine.store.entries())
    return elapsed, entries


ORCHESTRATED = """workflow bench "Orchestrated benchmark" {
    todo_task s0 "Step 0" {
        route build "Build" when "To build" {
            regular builder "Builder" {
                expect file "out.txt"
            }
        }
        tasks {
%s
        }
    }
}
"""


def prepared_orchestrated(folder: Path, tasks: int, pid: str) -> tuple[Engine, ScriptedAgent]:
    """A new run of one `todo_task` step of `tasks` todos, each to be delegated to a route
    whose sub-step expects a file, opened, and its script (per todo: the decision, then
    the sub-agent's answer)."""
    lines = "\n".join(f'            "Task {t}" => "Task {t} is built"' for t in range(tasks))
    definition = from_source(ORCHESTRATED % lines, "bench.todoflow").or_raise()
    (folder / "out.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / "out.txt").write_text("built")
    script: list[dict[str, object]] = []
    for t in range(tasks):
        script.append(
            {
                "next_action": "delegate",
                "selected_route_id": "build",
                "todo_id_to_execute": f"todo_{t + 1}",
                "instructions_to_sub_agent": f"Build task {t}.",
            }
        )
        script.append({"evidence": f"built task {t}", "progress_execution_outcome": "built"})
    learnings = folder / "learnings"
    process.start(definition, folder / "runs", workspace=folder, process_id=pid, learnings=learnings).close()
    engine, _ = process.open_process(folder / "runs", pid)
    return engine, ScriptedAgent(script, folder)


def orchestrated_run(folder: Path, tasks: int, runs: int = 1) -> tuple[float, int]:
    """`runs` runs of `tasks` todos, each delegated to a route and prevalidated: their
    time and their todos."""
    elapsed = 0.0
    for run in range(runs):
        engine, agent = prepared_orchestrated(folder, tasks, f"orchestrated-{tasks}-{run}")
        start = time.perf_counter()
        driven(engine, agent)
        elapsed += time.perf_counter() - start
    return elapsed, tasks * runs


LINE = (  # a confirmation's journal line, as long as ours: what a floor writes per step
    b'{"seq":1234,"at":"2026-12-01T12:00:00.000Z","by":"agent","step":"s5","type":"confirm",'
    b'"position":34,"evidence":"checked task 533","progress_execution_outcome":"task 533 done"}\n'
)


def fsync_floor(folder: Path, count: int) -> float:
    """Per step: a journal line appended to a file and fsynced (the file grows), no engine."""
    handle = os.open(
        folder / f"floor-{time.monotonic_ns()}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    start = time.perf_counter()
    for _ in range(count):
        os.write(handle, LINE)
        os.fsync(handle)
    elapsed = time.perf_counter() - start
    os.close(handle)
    return elapsed / count


def preallocated_floor(folder: Path, count: int) -> float:
    """Per step: a journal line written into a file allocated ahead and synced with
    `fdatasync`, as our journal is written, no engine."""
    path = folder / f"floor-{time.monotonic_ns()}.jsonl"
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(handle, 0, count * len(LINE) + (1 << 20))
    start = time.perf_counter()
    for index in range(count):
        os.pwrite(handle, LINE, index * len(LINE))
        os.fdatasync(handle)
    elapsed = time.perf_counter() - start
    os.close(handle)
    return elapsed / count


class _Model:
    def __init__(self, remaining: int) -> None:
        self.remaining = remaining

    def has_task(self) -> bool:
        return self.remaining > 0

    def past_end(self) -> bool:
        return self.remaining <= 0


def bare_statechart(tasks: int) -> float:
    """Per step: the compiled StateChart alone, driven through intake and every confirm."""
    compiled = todoflow.compile(source(1, tasks), path="bench.todoflow")
    model = _Model(tasks)
    chart = compiled.machine_class(model=model)
    start = time.perf_counter()
    chart.send("submit_tasks")
    for _ in range(tasks):
        model.remaining -= 1
        chart.send("confirm")
    return (time.perf_counter() - start) / (tasks + 1)


def memory_engine(tasks: int) -> float:
    plan = from_source(source(1, tasks), "bench.todoflow").or_raise().plan
    store = MemoryStore("bench", plan, "2026-01-01T00:00:00Z")
    engine = Engine(store, Path("."), {"id": "bench", "title": "bench"})
    directive = engine.directive()
    start = time.perf_counter()
    ready = directive.ready_tasks or ()
    directive = engine.step(
        directive.attempt_id,
        {
            "tasks": [{"action": t.action, "expected_result": t.expected_result} for t in ready],
            "progress_checklist_outcome": "ready",
        },
        by="caller",
    )
    for reply in replies(1, tasks):
        directive = engine.step(directive.attempt_id, reply)
    assert directive.completed
    return (time.perf_counter() - start) / (tasks + 1)


def run_folder_bytes(folder: Path, steps: int, tasks: int) -> tuple[int, int]:
    """A run of `steps` checklists of `tasks` tasks driven to completion: the bytes its run
    folder holds (the journal up to its allocated zero tail) and its confirmations."""
    engine, agent = prepared_run(folder, steps, tasks, "size")
    driven(engine, agent)
    run = folder / "runs" / "size"
    total = 0
    for path in run.rglob("*"):
        if path.is_file():
            total += (
                len(path.read_bytes().rstrip(b"\0")) if path.name == "journal.jsonl" else path.stat().st_size
            )
    return total, steps * tasks


def langgraph_confirmation(folder: Path, count: int) -> float:
    """Per confirmation: LangGraph + SqliteSaver walking the same checklist (bench/peers.py)."""
    thread = peers.Thread(folder / f"langgraph-{time.monotonic_ns()}.sqlite", 100)
    try:
        start = time.perf_counter()
        for index in range(count):
            thread.confirm(index)
        return (time.perf_counter() - start) / count
    finally:
        thread.close()


def main() -> list[Figure]:
    """Rounds interleave the floors with our runs: each run is compared with the floors
    measured just before and just after it, so a slow spell of the disk falls on both sides
    of a round's ratio. A round drives five 100-task runs, a 1,000-task run and two runs of
    100 orchestrated todos on the disk, a 1,000-task run and LangGraph's 1,000
    confirmations in memory (tmpfs), and the in-memory engine against python-statemachine."""
    step = "durable confirmation"
    small = Figure(f"{step}, 100-task runs", "floor: append + fsync a journal line", target="<= 1.3")
    small_pre = Figure(f"{step}, 100-task runs", "floor: pwrite + fdatasync, allocated", target="<= 1.6")
    large = Figure(f"{step}, 1,000-task run", "floor: append + fsync a journal line", target="<= 1.3")
    large_pre = Figure(f"{step}, 1,000-task run", "floor: pwrite + fdatasync, allocated", target="<= 1.6")
    flat = Figure("per step, 1,000-task run", "per step, 100-task runs", target="<= 1.3")
    orchestrated = Figure(
        "orchestrated todo (decision + validated answer)",
        "floor: append + fsync a journal line",
        target="<= 3.0",
    )
    in_memory = Figure(
        "confirmation on tmpfs (the engine's CPU)", "LangGraph + SqliteSaver, tmpfs", target="<= 0.04"
    )
    engine = Figure(
        "engine, in-memory store, per step", "bare python-statemachine transition", target="<= 0.1"
    )
    size = Figure("run folder per confirmation", "the budget: 800 B", target="<= 1.0", unit="B")
    with scratch() as temporary, memory() as tmpfs:
        if tmpfs is None:
            print("no file system in memory (tmpfs; set TODOFLOW_BENCH_TMPFS): the tmpfs figure is left out")
        if not peers.available():
            print(peers.MISSING)
        for round_ in range(ROUNDS):
            folder = temporary / str(round_)
            folder.mkdir()
            sync = sync_latency(folder)
            before = fsync_floor(folder, 300), preallocated_floor(folder, 300)
            took, steps = durable_run(folder / "small", 1, 100, runs=5)
            took_large, steps_large = durable_run(folder / "large", 10, 100)
            took_orchestrated, todos = orchestrated_run(folder / "orchestrated", 100, runs=2)
            after = fsync_floor(folder, 300), preallocated_floor(folder, 300)
            append, allocated = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
            small.add(took / steps, append, sync)
            small_pre.add(took / steps, allocated, sync)
            large.add(took_large / steps_large, append, sync)
            large_pre.add(took_large / steps_large, allocated, sync)
            flat.add(took_large / steps_large, took / steps, sync)
            orchestrated.add(took_orchestrated / todos, append, sync)
            if tmpfs is not None and peers.available():
                took_memory, steps_memory = durable_run(tmpfs / str(round_), 10, 100)
                in_memory.add(took_memory / steps_memory, langgraph_confirmation(tmpfs, 1000))
            engine.add(min(memory_engine(100) for _ in range(3)), min(bare_statechart(100) for _ in range(3)))
        total, confirmations = run_folder_bytes(temporary / "size", 10, 100)
        size.add(total / confirmations, 800)
    figures = [small, small_pre, large, large_pre, flat, orchestrated, in_memory, engine, size]
    figures = [figure for figure in figures if figure.ratios]
    report("runtime", figures, ROUNDS)
    return figures


if __name__ == "__main__":
    main()
