"""Compile speed and memory: the full in-memory compile (parse, check, emit every
artifact, no file writes) of the ~1 MB benchmark workflow against a bare Lark parse
of the same text, the compile's peak memory against the source size, and how the
compile time grows with the size of a workflow (4x the steps, 4x the `needs` lines:
linear growth is 4x the time), and how `check` grows on the fuzzer's large input: one
`needs` line of refused paths, each diagnostic rendered with its excerpt.

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
from todoflow.compiler.analysis import analyze
from todoflow.dsl.diagnostics import render_all
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


def refused_needs_source(paths: int) -> str:
    """One `needs` line of `paths` absolute paths, each refused (E0404)."""
    line = ", ".join(f'"/abs/in/{i}.json"' for i in range(paths))
    return f'workflow needs "Needs" {{\n    regular a "A" {{\n        needs {line}\n    }}\n}}\n'


def check_rendered(text: str) -> int:
    """`todoflow check`'s work in memory: parse, check, every diagnostic rendered."""
    analysis = analyze(text, "bench.todoflow", None)
    return len(render_all(analysis.diagnostics, analysis.sources))


def nested_source(steps: int) -> str:
    """`steps` todo_task steps of 100 tasks, each with a route to a sub-step (nested)."""
    return big_source(steps=steps, tasks=100)


def growth(
    make: Callable[[int], str], small: int, work: Callable[[str], int] = full_compile
) -> tuple[float, float]:
    """Best-of-2 runs of `work` (a full compile) on `make(small)` and `make(4 * small)`,
    the garbage collector on, as in `todoflow compile`."""
    texts = make(small), make(4 * small)
    return best_of(2, lambda: work(texts[0])), best_of(2, lambda: work(texts[1]))


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
        for name in ("flat steps", "needs lines", "nested todo_task steps", "refused needs paths")
    }
    makes = {"flat steps": (flat_source, 1000), "needs lines": (needs_source, 12_500)}
    makes["nested todo_task steps"] = (nested_source, 10)
    checks = {"refused needs paths": (refused_needs_source, 5_000)}
    for round_ in range(ROUNDS):
        compiling.add(best_of(1, lambda: full_compile(text)), best_of(1, lambda: bare.parse(text)))
        for name, (make, small) in makes.items():
            one, four = growth(make, small)
            grown[name].add(four, one)
        for name, (make, small) in checks.items():
            one, four = growth(make, small, check_rendered)
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
