"""Scratch folders for the benchmarks: under build/bench/ (git-ignored), removed when the
benchmark ends, Ctrl-C included, so an interrupted run leaves nothing in the repo."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

BUILD = Path(__file__).resolve().parent.parent / "build" / "bench"


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as folder:
        yield Path(folder)
