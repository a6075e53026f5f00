"""The kill loop (issue 21): `todoflow run` processes of orchestrated and learn_code runs
SIGKILLed at random points, each run resumed to its end, then checked by a verifier
that reads its journal; and the full-disk levels. Not part of `make test` (its small
version is tests/runtime/store/test_kill_loop.py):

    .venv/bin/python -m tests.support.kill_loop --kills 300
    .venv/bin/python -m tests.support.kill_loop --kills 40 --seed 7 --full-disk 10 --keep

A kill is timed (SIGKILL from outside after a random delay within an uninterrupted run's
time) or lands at a random store operation (tests/support/crash_runner.py: `before`,
`partial` or `after` it). A run, and each of its resumes, is killed up to three times;
then it is resumed to its end. A full-disk run fills the disk at a random store
operation (every derived write fails from then on, the journal still takes its lines),
finishes, and is opened with `todoflow.resume`, which must make it whole.

`verify` reads a finished run: its events.jsonl, todos and learnings against a fresh
derivation from its journal (`Engine.gaps`, the engine's own), each learning once and as
the journal derives it, the confirmations of its last attempt those of the
uninterrupted run (none lost, none doubled), and no process left of a learn_code script
(the process groups its journal records, or anything working in the run's folder).
Prints a line per failure and a summary; exit 1 when anything failed. Cases that failed
are kept in the scratch folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..conftest import ROOT

MODES = ("before", "partial", "after")
AGENT = ("--agent", "scripted:replies.yaml")
CONVERTED = "replies:\n" + (  # the sub-agent's answer to any delegation, however many attempts
    '  - {files: {converted.log: "done\\n"}, evidence: "converted", progress_execution_outcome: "ok"}\n' * 60
)
VOLATILE = {"seq", "at", "runner", "group", "leader"}  # what differs between two runs' journals
FULL = 1 << 20  # full-disk cases draw from seeds this far past the kill cases'


@dataclass(frozen=True)
class Scenario:
    name: str
    flow: str
    replies: str
    script: str | None  # learn_code: learnings/<step>/main.py
    step: str  # the learn_code step ("": none)
    options: tuple[str, ...]
    operations: int  # at most this many store operations in a run (a kill point past them misses)


def scenarios() -> tuple[Scenario, ...]:
    examples = ROOT / "examples"
    return (
        Scenario(
            "orchestrated",
            (examples / "orchestrated.todoflow").read_text(),
            (examples / "replies" / "orchestrated.yaml").read_text(),
            None,
            "",
            AGENT,
            30,
        ),
        Scenario(
            "learn_code",
            (examples / "fast-path.todoflow").read_text(),
            CONVERTED,
            (examples / "learnings" / "convert-all" / "main.py").read_text(),
            "convert-all",
            (*AGENT, "--fast-path-only"),
            20,
        ),
    )


@dataclass(frozen=True)
class Reference:
    """An uninterrupted run of a scenario: its confirmations, and when it ran."""

    confirmations: list[dict[str, Any]]
    created: float  # seconds until its run folder was there
    took: float


@dataclass
class Case:
    """One run: how often it was killed, how, and what the verifier found."""

    scenario: str
    folder: Path
    kills: Counter[str] = field(default_factory=Counter)  # timed / operation
    full_disk: bool = False
    lacked: bool = False  # a full-disk run that finished with derived files behind
    problems: list[str] = field(default_factory=list)


def setup(folder: Path, scenario: Scenario) -> None:
    folder.mkdir(parents=True)
    (folder / "flow.todoflow").write_text(scenario.flow)
    (folder / "replies.yaml").write_text(scenario.replies)
    if scenario.script is not None:
        (folder / "learnings" / scenario.step).mkdir(parents=True)
        (folder / "learnings" / scenario.step / "main.py").write_text(scenario.script)


def start(folder: Path, args: list[str], crash: tuple[int, str] | None = None) -> subprocess.Popen[str]:
    """`todoflow ARGS` in the run's folder; `crash`: through crash_runner, dying (or
    filling the disk) at that store operation."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "todoflow", *args]
    if crash is not None:
        env |= {"CRASH_AT": str(crash[0]), "CRASH_MODE": crash[1]}
        command = [sys.executable, str(ROOT / "tests" / "support" / "crash_runner.py"), *args]
    return subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finished(child: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    """The exit code and stderr of a child left to end."""
    _, err = child.communicate(timeout=timeout)
    return child.returncode, err


def run_folder(folder: Path) -> Path | None:
    runs = folder / ".todoflow" / "runs"
    found = [p for p in runs.iterdir() if (p / "run.json").is_file()] if runs.is_dir() else []
    return found[0] if len(found) == 1 else None


def command(folder: Path, scenario: Scenario) -> list[str]:
    """A fresh run, or the resume of the run the folder holds."""
    run = run_folder(folder)
    head = ["run", "--resume", run.name] if run is not None else ["run", "flow.todoflow"]
    return [*head, *scenario.options]


def reference(base: Path, scenario: Scenario) -> Reference:
    """Run the scenario uninterrupted, timing it; its verified confirmations."""
    folder = base / f"reference-{scenario.name}"
    setup(folder, scenario)
    began = time.monotonic()
    child = start(folder, command(folder, scenario))
    created = 0.0
    while child.poll() is None and not created:
        if run_folder(folder) is not None:
            created = time.monotonic() - began
        time.sleep(0.005)
    code, err = finished(child)
    took = time.monotonic() - began
    if code != 0:
        raise SystemExit(f"the uninterrupted {scenario.name} run failed: {err}")
    run = run_folder(folder)
    assert run is not None
    return Reference(confirmations(run), created or took / 2, took)


# -- the verifier -------------------------------------------------------------------


def confirmations(run: Path) -> list[dict[str, Any]]:
    """The journal's entries from the last start of a fast path (a learn_code run: the
    attempt that completed the step), or all of them, without what differs between runs."""
    from todoflow.runtime.entries import FastPathStarted, to_json
    from todoflow.runtime.process import open_process

    with open_process(run.parent, run.name)[0] as engine:
        entries = engine.store.entries()
    last = max((i for i, e in enumerate(entries) if isinstance(e, FastPathStarted)), default=0)
    return [{k: v for k, v in to_json(e).items() if k not in VOLATILE} for e in entries[last:]]


def verify(run: Path, expected: list[dict[str, Any]]) -> list[str]:
    """What is wrong with a finished run, read from its journal: nothing, when its derived
    files match what the journal derives, each learning is there once, its last attempt
    confirmed what `expected` confirms, and no script of it runs."""
    from todoflow.dsl.diagnostics import TodoflowError
    from todoflow.runtime.entries import FastPathStarted
    from todoflow.runtime.process import open_process

    try:
        with open_process(run.parent, run.name)[0] as engine:
            if not engine.directive().completed:
                return ["the run is not complete"]
            problems = engine.gaps()
            problems += learnings_problems(engine)
            groups = {e.group for e in engine.store.entries() if isinstance(e, FastPathStarted) and e.group}
    except TodoflowError as error:
        return [str(error)]
    if confirmations(run) != expected:
        problems.append("its journal's confirmations differ from the uninterrupted run's (lost or doubled)")
    problems += [
        f"a script outlived its attempt: {left}" for left in leftovers(groups, run.parent.parent.parent)
    ]
    return problems


def learnings_problems(engine: Any) -> list[str]:
    """The run's learnings as its journal derives them (`learned`, the engine's own
    derivation): each held exactly once, as derived, none that the journal does not prove."""
    from todoflow.runtime.learnings import learned
    from todoflow.runtime.state import initial_state, replay

    store, learnings = engine.store, engine.learnings
    if learnings is None:
        return []
    replayed = replay(store.plan, initial_state(store.plan, store.started_at), store.entries())
    expected = {lg.id: lg for lg in learned(store.plan, store.process_id, store.definition_sha256, replayed)}
    lines = [json.loads(line) for _, line in learnings.lines(store.process_id)]
    counted = Counter((line["id"], line["status"]) for line in lines)
    problems = [f"learning {key[0]} is written {n} times" for key, n in counted.items() if n > 1]
    held = {record.id: record for record in learnings.records() if record.process_id == store.process_id}
    problems += [f"learning {i} is missing" for i in expected if i not in held]
    problems += [
        f"learning {i} differs from the journal's" for i in expected if i in held and held[i] != expected[i]
    ]
    problems += [f"learning {i} is not proved by the journal" for i in held if i not in expected]
    return problems


def leftovers(groups: set[int], folder: Path) -> list[str]:
    """Live processes of the script groups a journal records, or working in `folder`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            state, _, group = stat.rpartition(")")[2].split()[:3]
            cwd = os.readlink(proc / "cwd")
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        if state != "Z" and (int(group) in groups or Path(cwd).is_relative_to(folder)):
            found.append(f"pid {proc.name} (group {group}): {line.strip()}")
    return found


# -- the cases --------------------------------------------------------------------


def attempt(
    folder: Path, scenario: Scenario, timing: Reference, chance: random.Random
) -> tuple[str, int, str]:
    """One run or resume, killed at a random point: how (`timed`, `operation`), its exit
    code (-9: killed) and stderr."""
    args = command(folder, scenario)
    if chance.random() < 0.5:
        child = start(folder, args)
        try:
            return "timed", *finished(child, chance.uniform(timing.created * 0.8, timing.took))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            return "timed", *finished(child)
    crash = (chance.randint(1, scenario.operations), chance.choice(MODES))
    return "operation", *finished(start(folder, args, crash))


def killed_case(folder: Path, scenario: Scenario, timing: Reference, chance: random.Random) -> Case:
    """A run killed up to three times (a kill that misses lets it finish), then resumed
    to its end and verified."""
    case = Case(scenario.name, folder)
    setup(folder, scenario)
    code = -9
    for _ in range(chance.randint(1, 3)):
        how, code, err = attempt(folder, scenario, timing, chance)
        if code == -9:
            case.kills[how] += 1
            continue
        if code != 0:
            case.problems.append(
                f"`{' '.join(command(folder, scenario))}` exited {code}: {err.strip()[-400:]}"
            )
            return case
        break
    if code != 0:
        code, err = finished(start(folder, command(folder, scenario)))
        if code != 0:
            case.problems.append(f"the last resume exited {code}: {err.strip()[-400:]}")
            return case
    return verified(case, timing)


def verified(case: Case, timing: Reference) -> Case:
    run = run_folder(case.folder)
    if run is None:
        case.problems.append("no run folder")
    else:
        case.problems += verify(run, timing.confirmations)
    return case


def full_disk_case(folder: Path, scenario: Scenario, timing: Reference, chance: random.Random) -> Case:
    """A run whose disk fills at a random store operation, finished, then opened with
    `todoflow.resume` (space again): it must be made whole."""
    import todoflow

    case = Case(scenario.name, folder, full_disk=True)
    setup(folder, scenario)
    crash = (chance.randint(1, scenario.operations), "full")
    code, err = finished(start(folder, command(folder, scenario), crash))
    run = run_folder(folder)
    if code != 0 or run is None:
        case.problems.append(f"the run on a full disk exited {code}: {err.strip()[-400:]}")
        return case
    from todoflow.runtime.process import open_process

    with open_process(run.parent, run.name)[0] as engine:
        case.lacked = bool(engine.gaps())
    with todoflow.resume(run.name, run_dir=run.parent):
        pass
    return verified(case, timing)


# -- the loop -----------------------------------------------------------------------


@dataclass
class Tally:
    kills: Counter[str] = field(default_factory=Counter)  # timed / operation
    runs: Counter[str] = field(default_factory=Counter)  # per scenario
    full_disk: int = 0
    lacked: int = 0
    failed: list[Case] = field(default_factory=list)

    def add(self, case: Case, keep: bool) -> None:
        self.kills += case.kills
        self.runs[case.scenario] += 1
        self.full_disk += case.full_disk
        self.lacked += case.lacked
        if case.problems:
            self.failed.append(case)
            print(f"FAILED {case.folder} ({case.scenario}): {'; '.join(case.problems)}", flush=True)
        elif not keep:
            shutil.rmtree(case.folder, ignore_errors=True)

    def killed(self) -> int:
        return sum(self.kills.values())

    def summary(self, seconds: float) -> str:
        runs = ", ".join(f"{name} {n}" for name, n in sorted(self.runs.items()))
        return (
            f"{self.killed()} kills ({self.kills['timed']} timed, {self.kills['operation']} at a store "
            f"operation) in {sum(self.runs.values()) - self.full_disk} runs, and {self.full_disk} full-disk "
            f"runs ({runs} in all); {self.lacked} of the full-disk runs finished lacking derived files, "
            f"then made whole by todoflow.resume; {len(self.failed)} failed; {seconds:.0f} s"
        )


@dataclass(frozen=True)
class Options:
    kills: int
    full_disk: int
    seed: int
    workers: int
    scratch: Path
    keep: bool = False  # every case's folder, not only failed ones


def loop(options: Options) -> Tally:
    """Kill runs until `options.kills` kills landed, then the full-disk runs; every run
    verified. Cases alternate between the scenarios; kill case N uses seed + N, full-disk
    case N seed + FULL + N (the same points whatever the kills before them)."""
    options.scratch.mkdir(parents=True, exist_ok=True)
    kinds = scenarios()
    timings = {s.name: reference(options.scratch, s) for s in kinds}
    tally = Tally()

    def case(number: int, full: bool) -> Case:
        scenario = kinds[number % len(kinds)]
        chance = random.Random(options.seed + number + (FULL if full else 0))
        folder = (options.scratch / f"{'full' if full else 'kill'}-{number}").resolve()
        make = full_disk_case if full else killed_case
        return make(folder, scenario, timings[scenario.name], chance)

    with ThreadPoolExecutor(options.workers) as pool:
        pending: set[Future[Case]] = set()
        started = Counter[bool]()
        while pending or tally.killed() < options.kills or started[True] < options.full_disk:
            while len(pending) < options.workers and (
                tally.killed() < options.kills or started[True] < options.full_disk
            ):
                full = tally.killed() >= options.kills
                pending.add(pool.submit(case, started[full], full))
                started[full] += 1
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                tally.add(future.result(), options.keep)
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.kill_loop", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--kills", type=int, default=300, help="SIGKILLs to land (default 300)")
    parser.add_argument("--full-disk", type=int, default=20, help="full-disk runs after them (default 20)")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--workers", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--scratch", type=Path, default=ROOT / "build" / "kill-loop")
    parser.add_argument("--keep", action="store_true", help="keep every case's folder, not only failed ones")
    args = parser.parse_args(argv)
    began = time.monotonic()
    tally = loop(Options(args.kills, args.full_disk, args.seed, args.workers, args.scratch, args.keep))
    print(tally.summary(time.monotonic() - began))
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
