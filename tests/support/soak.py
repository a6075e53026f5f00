"""Soak: the tests that kill processes or wait on time, run round after round with every
core kept busy by CPU burners, and the count of what passed and what failed. A test that
fails now and then shows here, not in a submission's CI. Not part of `make test`:

    .venv/bin/python -m tests.support.soak                           # 30 rounds of every group
    .venv/bin/python -m tests.support.soak --rounds 10 --group crash --group browser
    .venv/bin/python -m tests.support.soak --rounds 5 -- -k immediate    # pytest's options after --

A round runs each group in one pytest process (PostgreSQL required, as in CI). The
output of a run that failed is kept in build/soak/ and its path printed; the exit
status is 1 when anything failed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from ..conftest import ROOT
from .postgres import REQUIRED

GROUPS = {
    "postgres-scale": ["tests/runtime/store/test_postgres_scale.py"],
    "postgres": [
        "tests/runtime/store/test_postgres.py",
        "tests/runtime/store/test_postgres_contract.py",
        "tests/runtime/store/test_postgres_lost_commit.py",
    ],
    "crash": ["tests/runtime/store/test_crash.py"],
    "browser": ["tests/runtime/views/test_browser.py", "tests/runtime/views/test_report_browser.py"],
    "fast-path": ["tests/runtime/agents/test_fast_path.py", "tests/runtime/serve/test_served_fast_path.py"],
    "lsp-mcp": ["tests/lsp/test_lsp.py", "tests/runtime/serve/test_mcp.py"],
}
SCRATCH = ROOT / "build" / "soak"
BURN = "while True: pass"


@dataclass
class Tally:
    """One group's rounds: how each ended, and each test's outcomes."""

    rounds: Counter[str] = field(default_factory=Counter)  # passed / failed
    tests: dict[str, Counter[str]] = field(default_factory=dict)  # node id -> passed / failed / skipped
    logs: list[Path] = field(default_factory=list)  # the output of each failed round
    seconds: float = 0.0


def run_group(name: str, files: list[str], round_number: int, extra: list[str], tally: Tally) -> str:
    """One pytest run of the group; a line saying how it went."""
    report = SCRATCH / f"{name}-{round_number}.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    began = time.monotonic()
    result = subprocess.run(
        [*command, *files, *extra],
        cwd=ROOT,
        env={**os.environ, REQUIRED: "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - began
    tally.seconds += took
    outcomes = _outcomes(report)
    report.unlink(missing_ok=True)
    for test, outcome in outcomes.items():
        tally.tests.setdefault(test, Counter())[outcome] += 1
    counted = Counter(outcomes.values())
    failed = result.returncode != 0 or not outcomes
    tally.rounds["failed" if failed else "passed"] += 1
    shown = ", ".join(f"{n} {kind}" for kind, n in sorted(counted.items())) or "no test ran"
    if failed:
        log = SCRATCH / f"{name}-{round_number}.log"
        log.write_text(result.stdout + result.stderr)
        tally.logs.append(log)
        shown += f", exit {result.returncode}: {log.relative_to(ROOT)}"
    return f"{name} {shown} ({took:.0f} s)"


def _outcomes(report: Path) -> dict[str, str]:
    """Each test of a junit XML report: passed, failed or skipped."""
    if not report.exists():
        return {}
    found = {}
    for case in ElementTree.parse(report).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[test] = "failed" if kinds & {"failure", "error"} else "passed"
        if "skipped" in kinds:
            found[test] = "skipped"
    return found


def summary(tallies: dict[str, Tally], rounds: int, burners: int) -> list[str]:
    lines = [f"soak: {rounds} rounds, {burners} CPU burners"]
    for name, tally in tallies.items():
        passed, failed = tally.rounds["passed"], tally.rounds["failed"]
        tests = sum(tally.tests.values(), Counter())
        lines.append(
            f"  {name}: {passed} rounds passed, {failed} failed; tests {tests['passed']} passed, "
            f"{tests['failed']} failed, {tests['skipped']} skipped; {tally.seconds / rounds:.0f} s a round"
        )
        for test, outcomes in sorted(tally.tests.items()):
            if outcomes["failed"]:
                lines.append(f"    {test}: failed {outcomes['failed']} of {sum(outcomes.values())}")
        lines.extend(f"    log: {log.relative_to(ROOT)}" for log in tally.logs)
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.soak", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=30, choices=range(1, 1001), metavar="N")
    parser.add_argument("--group", action="append", choices=sorted(GROUPS), help="default: every group")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="default: one per core")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to each pytest run")
    args = parser.parse_args(argv)
    groups = args.group or list(GROUPS)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    tallies = {name: Tally() for name in groups}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stopped: the burners and pytest too
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    try:
        for number in range(1, args.rounds + 1):
            extra = args.pytest_args
            lines = [run_group(name, GROUPS[name], number, extra, tallies[name]) for name in groups]
            print(f"round {number}/{args.rounds}: " + "; ".join(lines), flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print("\n".join(summary(tallies, args.rounds, args.burners)))
    return 1 if any(tally.rounds["failed"] for tally in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
