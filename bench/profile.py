"""The top functions of a step, a resume or an orchestrated todo, in one command, so the
next regression is found where it is.

    .venv/bin/python -m bench.profile step|resume|orchestrated [--top N] [--sort tottime|cumtime]
                                      [--where FOLDER]

`step`: a run of 10 checklists of 100 tasks driven to completion by a scripted agent
through a run folder (the driver's loop only: the run's start is not profiled).
`resume`: the worst case, a run whose journal ends just before its next snapshot,
opened and asked its first directive 50 times in a warm process.
`orchestrated`: a `todo_task` step of 100 todos, each delegated to a route and
prevalidated. Functions are timed by the process's CPU time (a shared machine's other
work does not show), or by the wall clock with `--wall`. `--where` puts the run
folders in another folder (a tmpfs, to see the engine's CPU without the disk's
syncs); by default they go under build/bench/.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.resume import cases, resume, stopped_run
from bench.runtime import driven, prepared_orchestrated, prepared_run
from bench.scratch import scratch

RESUMES = 50


@contextlib.contextmanager
def _folder(where: str | None) -> Iterator[Path]:
    if where is None:
        with scratch() as folder:
            yield folder
    else:
        with tempfile.TemporaryDirectory(dir=where) as folder:
            yield Path(folder)


def _step(folder: Path) -> Callable[[], object]:
    engine, agent = prepared_run(folder, 10, 100, "step")
    return lambda: driven(engine, agent)


def _resume(folder: Path) -> Callable[[], object]:
    run = stopped_run(folder, "resume", cases(folder)["right before the next"])
    resume(run.parent, run.name)  # warm: modules imported, the plan read once

    def work() -> None:
        for _ in range(RESUMES):
            resume(run.parent, run.name)

    return work


def _orchestrated(folder: Path) -> Callable[[], object]:
    engine, agent = prepared_orchestrated(folder, 100, "orchestrated")
    return lambda: driven(engine, agent)


CASES = {"step": _step, "resume": _resume, "orchestrated": _orchestrated}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--top", type=int, default=30, help="how many functions to print (default 30)")
    parser.add_argument("--sort", choices=("tottime", "cumtime"), default="tottime")
    parser.add_argument("--where", help="the folder to make the runs in (default: under build/bench/)")
    parser.add_argument(
        "--wall",
        action="store_true",
        help="time by the clock on the wall (syncs and waits included) instead of the process's CPU time",
    )
    args = parser.parse_args(argv)
    with _folder(args.where) as folder:
        work = CASES[args.case](folder)
        profile = cProfile.Profile(time.perf_counter if args.wall else time.process_time)
        profile.runcall(work)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    print(out.getvalue().rstrip())


if __name__ == "__main__":
    main()
