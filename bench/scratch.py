"""Scratch folders for the benchmarks: under build/bench/ (git-ignored), removed when the
benchmark ends, Ctrl-C included, so an interrupted run leaves nothing in the repo.

`memory()` is a scratch folder on a file system in memory (tmpfs), where a sync costs
next to nothing, so what a step costs there is the engine's CPU: `$TODOFLOW_BENCH_TMPFS`,
or `/dev/shm` where the system has one (None: there is none, and the benchmark says so)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

BUILD = Path(__file__).resolve().parent.parent / "build" / "bench"
SHARED_MEMORY = Path("/dev/shm")  # the usual tmpfs of a Linux system


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as folder:
        yield Path(folder)


@contextlib.contextmanager
def memory() -> Iterator[Path | None]:
    """A scratch folder in memory, or None where there is no tmpfs to make it in."""
    given = os.environ.get("TODOFLOW_BENCH_TMPFS")
    where = Path(given) if given else SHARED_MEMORY
    if not (where.is_dir() and os.access(where, os.W_OK)):
        yield None
        return
    with tempfile.TemporaryDirectory(dir=where) as folder:
        yield Path(folder)
