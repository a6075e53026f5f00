"""Parse speed: `todoflow.parse` against a bare Lark parse of the same text, and the
cold start of `todoflow check` against `python -c pass`, all measured in one run.

    .venv/bin/python bench/parse.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.workload import big_source  # noqa: E402
from todoflow.dsl import parse  # noqa: E402
from todoflow.dsl.grammar import bare_parser  # noqa: E402


def best_of(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def cold(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=False, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    text = big_source()
    megabytes = len(text.encode()) / 1e6
    bare = bare_parser()
    parse(text)  # warm: grammar loaded, caches filled
    ours = best_of(5, lambda: parse(text, "bench.todoflow"))
    baseline = best_of(5, lambda: bare.parse(text))
    print(f"source: {megabytes:.2f} MB, {text.count(chr(10))} lines")
    print(f"todoflow.parse        {megabytes / ours:6.2f} MB/s  ({ours * 1000:.0f} ms)")
    print(f"bare Lark tree parse  {megabytes / baseline:6.2f} MB/s  ({baseline * 1000:.0f} ms)")
    print(f"ratio parse/bare      {ours / baseline:6.2f}x  (target <= 1.0)")

    example = ROOT / "examples" / "release.todoflow"
    with tempfile.TemporaryDirectory():
        subprocess.run(
            [sys.executable, "-m", "todoflow", "check", str(example)], check=True, capture_output=True
        )
        check = cold([sys.executable, "-m", "todoflow", "check", str(example)], 21)
        python = cold([sys.executable, "-c", "pass"], 21)
    print(f"cold `todoflow check` {check * 1000:6.1f} ms")
    print(f"cold `python -c pass` {python * 1000:6.1f} ms")
    print(f"ratio check/python    {check / python:6.2f}x  (target <= 6.0)")


if __name__ == "__main__":
    main()
