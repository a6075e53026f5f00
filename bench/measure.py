"""What every benchmark shares: a figure measured against its peer or floor in the same
run, over rounds, with the machine's load and the sync latency beside it, and the check
of its ratio against its target.

A figure keeps, per round, our time and the baseline's time (measured just before and
after, or interleaved with ours), so a slow spell of this shared machine falls on both
sides of the round's ratio. It prints min/median/max of each; `check` compares the
median ratio with the target, allowing the figure's own noise band: half the spread of
its per-round ratios relative to their median, and at least `MIN_BAND`.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

MIN_BAND = 0.10  # a ratio this close to its target is within noise on any machine
SYNC_SAMPLES = 50


@dataclass
class Figure:
    """One measure: ours against a baseline (a peer or a floor), round by round."""

    name: str
    baseline: str  # what it is compared with
    ours: list[float] = field(default_factory=list)  # seconds (or bytes) per round
    theirs: list[float] = field(default_factory=list)
    target: str = ""  # `<= 1.5` or `>= 0.7`; empty: reported only
    unit: str = "us"  # how the values print: us, ms, B, /s
    loads: list[float] = field(default_factory=list)  # the 1-minute load average at each round
    syncs: list[float] = field(default_factory=list)  # a pwrite + fdatasync's latency at each round

    def add(self, ours: float, theirs: float, sync: float | None = None) -> None:
        self.ours.append(ours)
        self.theirs.append(theirs)
        self.loads.append(os.getloadavg()[0])
        if sync is not None:
            self.syncs.append(sync)

    @property
    def ratios(self) -> list[float]:
        return [o / t for o, t in zip(self.ours, self.theirs, strict=True) if t]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def band(self) -> float:
        """The noise band: half the spread of the per-round ratios, relative, at least MIN_BAND."""
        ratios = self.ratios
        spread = (max(ratios) - min(ratios)) / (2 * statistics.median(ratios)) if len(ratios) > 1 else 0.0
        return max(MIN_BAND, spread)

    def failure(self) -> str | None:
        """Why the median ratio is worse than its target by more than the noise band (None: it is not)."""
        if not self.target or not self.ratios:
            return None
        op, _, value = self.target.partition(" ")
        limit = float(value)
        if op == "<=" and self.ratio > limit * (1 + self.band):
            return f"{self.name}: {self.ratio:.2f}x, target {self.target} (noise band {self.band:.0%})"
        if op == ">=" and self.ratio < limit * (1 - self.band):
            return f"{self.name}: {self.ratio:.2f}x, target {self.target} (noise band {self.band:.0%})"
        return None

    def lines(self) -> list[str]:
        ratios = self.ratios
        target = f"; target {self.target}" if self.target else ""
        out = [
            f"{self.name}",
            f"    ours      {_spread(self.ours, self.unit)}",
            f"    {self.baseline}",
            f"              {_spread(self.theirs, self.unit)}",
            f"    ratio     {_spread(ratios, 'x')}{target}",
        ]
        beside = f"    load {min(self.loads):.1f}-{max(self.loads):.1f}" if self.loads else "    load ?"
        if self.syncs:
            beside += f"; sync {_spread(self.syncs, 'us')}"
        return [*out, beside]


def _spread(values: Sequence[float], unit: str) -> str:
    """min / median / max of the values in their unit."""
    if not values:
        return "-"
    scale, suffix = {"us": (1e6, " us"), "ms": (1e3, " ms"), "x": (1, "x"), "B": (1, " B"), "/s": (1, "/s")}[
        unit
    ]
    low, mid, high = min(values) * scale, statistics.median(values) * scale, max(values) * scale
    largest = max(abs(low), abs(high))
    digits = 2 if unit == "x" else (0 if largest >= 100 else 1 if largest >= 10 else 2)
    return f"{mid:.{digits}f}{suffix} (min {low:.{digits}f}, max {high:.{digits}f})"


def report(title: str, figures: Sequence[Figure], rounds: int) -> None:
    """Print the figures of one benchmark, with the rounds they were measured over."""
    print(f"== {title}: {rounds} rounds; median (min, max) over the rounds")
    for figure in figures:
        print("\n".join(figure.lines()))


def median_time(work: Callable[[], object], samples: int) -> float:
    """The median wall time of `samples` calls of `work`."""
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sync_latency(folder: Path, samples: int = SYNC_SAMPLES) -> float:
    """The median latency of one line written into an allocated file and synced with
    `fdatasync` (the journal's write): what a durable step cannot do without."""
    path = folder / f".sync-{time.monotonic_ns()}"
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(handle, 0, 1 << 20)
        line = b'{"seq":1,"type":"confirm","position":1}\n'
        times = []
        for index in range(samples):
            start = time.perf_counter()
            os.pwrite(handle, line, index * len(line))
            os.fdatasync(handle)
            times.append(time.perf_counter() - start)
    finally:
        os.close(handle)
        path.unlink()
    return statistics.median(times)


def record(path: Path, module: str, figures: Sequence[Figure]) -> None:
    """Append the figures to a results file (one JSON object per line), for `bench --check`
    and for the docs' tables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        for figure in figures:
            data = asdict(figure) | {"module": module, "ratio": figure.ratio if figure.ratios else None}
            out.write(json.dumps(data) + "\n")
