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


def growth(make: Callable[[int], str], small: int) -> tuple[float, float]:
    """Best-of-3 full compiles of `make(small)` and `make(4 * small)`."""
    texts = make(small), make(4 * small)
    return best_of(3, lambda: full_compile(texts[0])), best_of(3, lambda: full_compile(texts[1]))


def main() -> None:
    text = big_source()
    size = len(text.encode())
    bare = bare_parser()
    full_compile(text)  # warm: grammar, templates and imports loaded
    ours = best_of(5, lambda: full_compile(text))
    baseline = best_of(5, lambda: bare.parse(text))
    print(f"source: {size / 1e6:.2f} MB")
    print(f"full compile in memory  {ours * 1000:7.0f} ms")
    print(f"bare Lark tree parse    {baseline * 1000:7.0f} ms")
    print(f"ratio compile/bare      {ours / baseline:7.2f}x  (target <= 2.0)")

    gc.collect()
    tracemalloc.start()
    full_compile(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"peak memory of compile  {peak / 1e6:7.1f} MB")
    print(f"ratio peak/source       {peak / size:7.2f}x  (target <= 10.0)")

    for what, make, small in (("flat steps", flat_source, 1000), ("needs lines", needs_source, 12_500)):
        one, four = growth(make, small)
        print(f"{small:>6} {what:<12} {one * 1000:7.0f} ms;  {4 * small:>6}: {four * 1000:7.0f} ms")
        print(f"ratio 4x {what:<12}    {four / one:7.2f}x  (target <= 4.5)")


if __name__ == "__main__":
    main()
