"""Shared paths and helpers for the test suite."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .support.postgres import pg_cluster, pg_url  # noqa: F401  (the PostgreSQL fixtures, for the store's tests)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.todoflow"))
FIXTURES = ROOT / "tests" / "fixtures"
VALID = sorted((FIXTURES / "valid").glob("*.todoflow"))
INVALID = sorted((FIXTURES / "invalid").glob("*.todoflow"))
WARNING = sorted((FIXTURES / "warning").glob("*.todoflow"))
FMT = sorted((FIXTURES / "fmt").glob("*.todoflow"))


@pytest.fixture(autouse=True)
def _no_secrets_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts knowing no secret: what one test's configuration kept (a key, a
    `${VAR}` value) must not be redacted from another's journal in the same process."""
    from todoflow.runtime import entries as redaction  # the secrets no entry may hold

    monkeypatch.setattr(redaction, "_SECRETS", [()])


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def wait_until(condition: Callable[[], bool], awaited: str, within: float = 60.0) -> None:
    """Wait for `condition`, looked at every 50 ms; after `within` seconds the test fails
    saying what it waited for. (A test orders events by what happened, never by a sleep.)"""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {within:g} s for {awaited}")
        time.sleep(0.05)


def run_cli(
    *args: str, stdin: str | bytes | None = None, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m todoflow` as a user would, capturing both streams as text."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    result = subprocess.run(
        [sys.executable, "-m", "todoflow", *args],
        input=data,
        capture_output=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


# No test may reach a model beyond this machine: the LLM agent refuses any endpoint that
# is not on loopback while this is set (subprocesses inherit it).
os.environ["TODOFLOW_LLM_LOOPBACK_ONLY"] = "1"
