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
import statistics
import time
from pathlib import Path

import todoflow
from bench.scratch import scratch
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


def durable_run(folder: Path, steps: int, tasks: int, runs: int = 1) -> tuple[float, int]:
    """`runs` processes of the workflow driven to completion: their time and their steps."""
    definition = from_source(source(steps, tasks), "bench.todoflow").or_raise()
    elapsed, entries = 0.0, 0
    for run in range(runs):
        pid = f"bench-{steps}x{tasks}-{run}"
        process.start(definition, folder / "runs", workspace=folder, process_id=pid).close()
        engine, store = process.open_process(folder / "runs", pid)
        agent = ScriptedAgent(replies(steps, tasks), folder)
        start = time.perf_counter()
        outcome = drive(engine, agent, io.StringIO())
        elapsed += time.perf_counter() - start
        store.close()
        assert outcome == "complete", outcome
        entries += len(store.entries())
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


def orchestrated_run(folder: Path, tasks: int, runs: int = 1) -> tuple[float, int]:
    """`runs` runs of `tasks` todos, each delegated to a route and prevalidated: their
    time and their todos (each todo: the decision, then the sub-agent's validated answer)."""
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
    elapsed, todos = 0.0, 0
    for run in range(runs):
        pid = f"orchestrated-{tasks}-{run}"
        learnings = folder / "learnings"
        process.start(
            definition, folder / "runs", workspace=folder, process_id=pid, learnings=learnings
        ).close()
        engine, store = process.open_process(folder / "runs", pid)
        start = time.perf_counter()
        outcome = drive(engine, ScriptedAgent(script, folder), io.StringIO())
        elapsed += time.perf_counter() - start
        store.close()
        assert outcome == "complete", outcome
        todos += tasks
    return elapsed, todos


def fsync_floor(folder: Path, count: int) -> float:
    line = b'{"seq":1,"type":"confirm","position":1,"node":"work"}\n'
    handle = os.open(
        folder / f"floor-{time.monotonic_ns()}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    start = time.perf_counter()
    for _ in range(count):
        os.write(handle, line)
        os.fsync(handle)
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


def main() -> None:
    # Rounds interleave the floor with the runs: each run is compared with the floor
    # measured just before and just after it, so a slow spell of the disk falls on both
    # sides of a ratio; the medians over the rounds are reported. A round drives five
    # 100-task runs (101 steps take ~15 ms, short enough for one slow spell to swamp it).
    small_steps = large_steps = 0
    per: dict[str, list[float]] = {"floor": [], "small": [], "large": [], "orchestrated": []}
    ratios: dict[str, list[float]] = {
        "small": [],
        "large": [],
        "flat": [],
        "orchestrated": [],
        "two_steps": [],
    }
    with scratch() as temporary:
        for round_ in range(ROUNDS):
            folder = temporary / str(round_)
            before = fsync_floor(folder.parent, 500)
            small, small_steps = durable_run(folder / "small", 1, 100, runs=5)
            large, large_steps = durable_run(folder / "large", 10, 100)
            orchestrated, todos = orchestrated_run(folder / "orchestrated", 100, runs=2)
            floor = (before + fsync_floor(folder.parent, 500)) / 2
            per["floor"].append(floor)
            per["small"].append(small / small_steps)
            per["large"].append(large / large_steps)
            per["orchestrated"].append(orchestrated / todos)
            ratios["small"].append(per["small"][-1] / floor)
            ratios["large"].append(per["large"][-1] / floor)
            ratios["flat"].append(per["large"][-1] / per["small"][-1])
            ratios["orchestrated"].append(per["orchestrated"][-1] / floor)
            ratios["two_steps"].append(per["orchestrated"][-1] / (2 * per["small"][-1]))
    value = {name: statistics.median(v) for name, v in per.items()}
    ratio = {name: statistics.median(v) for name, v in ratios.items()}
    spread = {name: f"{min(v):.2f}-{max(v):.2f}" for name, v in ratios.items()}
    print(f"{ROUNDS} rounds; medians, with the range of the ratios over the rounds")
    print(f"{'floor: append + fsync one line':40s} {value['floor'] * 1e6:8.1f} us per step")
    runs = (("small", "100-task runs", small_steps), ("large", "1,000-task run", large_steps))
    for name, label, steps in runs:
        print(
            f"{f'{label} ({steps} steps)':40s} {value[name] * 1e6:8.1f} us per step "
            f"{ratio[name]:5.2f}x floor ({spread[name]}; target <= 2.0)"
        )
    print(f"{'1,000-task / 100-task, per step':40s} {ratio['flat']:8.2f}x  ({spread['flat']}; target <= 1.3)")
    label = "orchestrated todo (decision + validated)"
    print(
        f"{label:40s} {value['orchestrated'] * 1e6:8.1f} us per todo "
        f"{ratio['orchestrated']:5.2f}x floor ({spread['orchestrated']}; target <= 3.0)"
    )
    # what the orchestrator adds to the two journal entries a todo takes (the decision and
    # the sub-agent's answer): prevalidation, the learning, the extra events
    label = "orchestrated todo / two plain steps"
    print(f"{label:40s} {ratio['two_steps']:8.2f}x  ({spread['two_steps']})")
    bare = min(bare_statechart(100) for _ in range(3))
    engine = min(memory_engine(100) for _ in range(3))
    print(f"{'bare python-statemachine transitions':40s} {bare * 1e6:8.1f} us per step")
    ratio = f"{engine / bare:5.2f}x (target <= 3.0)"
    print(f"{'engine, in-memory store':40s} {engine * 1e6:8.1f} us per step  {ratio}")


if __name__ == "__main__":
    main()
