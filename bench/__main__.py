"""Every benchmark, or those named, in one run: `make bench` (`python -m bench`).

    .venv/bin/python -m bench [--check] [NAME ...]

Each benchmark prints its figures (min/median/max over its rounds, the load and the sync
latency beside each) and they are appended to build/bench/results.jsonl with the date,
the commit and the load. `--check` (`make bench-check`) exits 1 when a figure's median
ratio is worse than its target by more than its noise band (bench/measure.py): run it on
a quiet machine; on a loaded one the noise band grows with the spread of the rounds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from bench.measure import Figure, record
from bench.scratch import BUILD

# in the order `make bench` runs them; each module's `main()` returns its figures
BENCHMARKS = (
    "parse",
    "compile",
    "runtime",
    "resume",
    "replay",
    "mcp_step",
    "mcp_many",
    "mcp_http",
    "interop",
    "lsp",
    "llm",
    "tools",
    "commands",
    "postgres",
    "serve_workers",
)
RESULTS = BUILD / "results.jsonl"


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return found or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a ratio misses its target")
    parser.add_argument(
        "names", nargs="*", choices=[*BENCHMARKS, []], metavar="NAME", help=", ".join(BENCHMARKS)
    )
    args = parser.parse_args(argv)
    header = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": _commit(), "load": os.getloadavg()}
    print(f"{header['date']}, commit {header['commit']}, load {' '.join(f'{x:.2f}' for x in header['load'])}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
    failures: list[str] = []
    for name in args.names or BENCHMARKS:
        run: Callable[[], list[Figure] | None] = importlib.import_module(f"bench.{name}").main
        figures = run() or []
        record(RESULTS, name, figures)
        failures += [failure for figure in figures if (failure := figure.failure()) is not None]
        sys.stdout.flush()
    if args.check:
        for failure in failures:
            print(f"FAILED {failure}")
        print(f"{len(failures)} figure(s) worse than their target beyond the noise band")
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
