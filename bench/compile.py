"""Compile speed and memory: the full in-memory compile (parse, check, emit every
artifact, no file writes) of the ~1 MB benchmark workflow against a bare Lark parse
of the same text, and the compile's peak memory against the source size.

    .venv/bin/python bench/compile.py
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.parse import best_of  # noqa: E402
from bench.workload import big_source  # noqa: E402
from todoflow.api import compile  # noqa: E402
from todoflow.dsl.grammar import bare_parser  # noqa: E402


def full_compile(text: str) -> int:
    compiled = compile(text, path="bench.todoflow")
    compiled.raise_for_errors()
    return len(compiled.artifacts.files)


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


if __name__ == "__main__":
    main()
