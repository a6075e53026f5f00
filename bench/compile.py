"""Compile speed and memory: the full in-memory compile (parse, check, emit every
artifact, no file writes) of the ~1 MB benchmark workflow against a bare Lark parse
of the same text, the compile's peak memory against the source size, and how the
compile time grows with the size of a workflow (4x the steps, 4x the `needs` lines:
linear growth is 4x the time).

    .venv/bin/python -m bench.compile
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

from bench.measure import Figure, report
from bench.parse import best_of
from bench.workload import big_source
from todoflow.api import compile
from todoflow.dsl.grammar import bare_parser


def full_compile(text: str) -> int:
    compiled = compile(text, path="bench.todoflow")
    compiled.raise_for_errors()
    return len(compiled.artifacts.files)


def flat_source(steps: int) -> str:
    """`steps` regular steps, one after another."""
    body = "".join(
        f'    regular s{i} "Step {i}" {{\n        description "Do {i}."\n    }}\n' for i in range(steps)
    )
    return 'workflow flat "Flat" {\n' + body + "}\n"


def needs_source(lines: int) -> str:
    """One step with `lines` `needs` lines."""
    body = "".join(f'        needs "in/{i}.json"\n' for i in range(lines))
    return 'workflow needs "Needs" {\n    regular a "A" {\n' + body + "    }\n}\n"


def nested_source(steps: int) -> str:
    """`steps` todo_task steps of 100 tasks, each with a route to a sub-step (nested)."""
    return big_source(steps=steps, tasks=100)


def growth(make: Callable[[int], str], small: int) -> tuple[float, float]:
    """Best-of-2 full compiles of `make(small)` and `make(4 * small)`, the garbage
    collector on, as in `todoflow compile`."""
    texts = make(small), make(4 * small)
    return best_of(2, lambda: full_compile(texts[0])), best_of(2, lambda: full_compile(texts[1]))


ROUNDS = 5


def main() -> list[Figure]:
    text = big_source()
    size = len(text.encode())
    bare = bare_parser()
    full_compile(text)  # warm: grammar, templates and imports loaded
    print(f"source: {size / 1e6:.2f} MB")
    compiling = Figure("full compile in memory (~1 MB)", "bare Lark tree parse", target="<= 2.0", unit="ms")
    memory = Figure("peak memory of the compile (tracemalloc)", "source size", target="<= 10.0", unit="B")
    grown = {
        name: Figure(f"4x {name}", f"the same compile of 1/4 the {name}", target="<= 4.5", unit="ms")
        for name in ("flat steps", "needs lines", "nested todo_task steps")
    }
    makes = {"flat steps": (flat_source, 1000), "needs lines": (needs_source, 12_500)}
    makes["nested todo_task steps"] = (nested_source, 10)
    for round_ in range(ROUNDS):
        compiling.add(best_of(1, lambda: full_compile(text)), best_of(1, lambda: bare.parse(text)))
        for name, (make, small) in makes.items():
            one, four = growth(make, small)
            grown[name].add(four, one)
        if round_ == 0:
            gc.collect()
            tracemalloc.start()
            full_compile(text)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            memory.add(peak, size)
    figures = [compiling, memory, *grown.values()]
    report("compile", figures, ROUNDS)
    return figures


if __name__ == "__main__":
    main()
