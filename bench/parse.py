"""Parse speed: `todoflow.parse` against a bare Lark parse of the same text, and the
cold start of `todoflow check` against `python -c pass`, all measured in one run.

    .venv/bin/python -m bench.parse
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.measure import Figure, report
from bench.workload import big_source
from todoflow.dsl import parse
from todoflow.dsl.grammar import bare_parser

ROOT = Path(__file__).resolve().parent.parent


def best_of(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def cold(commands: list[list[str]], runs: int) -> list[float]:
    """Median wall time of each command, the runs interleaved so drift hits all alike.

    Bytecode caching is left on, as on a user's machine (an installed package ships
    its .pyc files); the first, warm-up run writes them for an editable install."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for command in commands:
        subprocess.run(command, check=False, capture_output=True, env=env)
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for command, samples in zip(commands, times, strict=True):
            start = time.perf_counter()
            subprocess.run(command, check=False, capture_output=True, env=env)
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]


ROUNDS = 5


def main() -> list[Figure]:
    text = big_source()
    megabytes = len(text.encode()) / 1e6
    bare = bare_parser()
    parse(text)  # warm: grammar loaded, caches filled
    print(f"source: {megabytes:.2f} MB, {text.count(chr(10))} lines")
    parsing = Figure(
        "todoflow.parse (text -> typed AST with spans)", "bare Lark LALR tree parse", target="<= 1.0"
    )
    parsing.unit = "ms"
    example = ROOT / "examples" / "release.todoflow"
    commands = [[sys.executable, "-m", "todoflow", "check", str(example)], [sys.executable, "-c", "pass"]]
    starting = Figure(
        "cold `todoflow check examples/release.todoflow`", "`python -c pass`", target="<= 3.5", unit="ms"
    )
    for _ in range(ROUNDS):
        parsing.add(best_of(2, lambda: parse(text, "bench.todoflow")), best_of(2, lambda: bare.parse(text)))
        check, python = cold(commands, 7)
        starting.add(check, python)
    report("parse", [parsing, starting], ROUNDS)
    return [parsing, starting]


if __name__ == "__main__":
    main()
