"""The process groups a run starts beside itself — a learn_code script (`fast_path.py`),
a `run_command` shell (`workspace_tools.py`) — and what is done about one its runner
left behind when it was killed.

Each group is journaled as it starts with its runner (`this_runner()`, `<host>:<pid>`), its id
and its leader's start (`leader`). A run resumed after that runner died kills what is
left of the group (`kill_left`), on the runner's own machine only. A process id can be
given to a new process once the old one is gone, so a group is killed only while it is
still the one recorded:

- its leader still runs and started when the recorded one did (Linux: the boot and the
  start time in `/proc`): the same process, so the group is ours;
- its leader is gone: POSIX gives no new process that id while a group of that id
  lives, so a group still there is what is left of ours;
- its leader runs but is another process (a different start), or cannot be told from
  ours (no `/proc`, or a journal of an older version that did not record the start):
  it is left alone.

What is not guaranteed: once every process of our group has ended, its id is free; a new
process given it that makes a group of its own and ends before its members would be
taken for what is left of ours. That needs the id to come round again between the
runner's death and the resume. A runner killed between starting a group and journaling
it (one write) leaves it unrecorded.

`starting()` holds back a stop signal (SIGTERM, SIGHUP, Ctrl-C, as the driver's
`stopped_by_signals` handles them) while a group is started and registered, so the stop
that unwinds the run always finds it to kill.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

from ..store.base import Store


def this_runner() -> str:
    """This process, as a journaled start names its runner. Asked at each start, never
    kept: a worker forked by `serve --workers` is another process than its parent."""
    return f"{socket.gethostname()}:{os.getpid()}"


def here(runner: str | None) -> bool:
    """Whether `runner` (`<host>:<pid>`) is a process of this machine."""
    return runner is not None and runner.rpartition(":")[0] == socket.gethostname()


def ended_here(store: Store, runner: str | None) -> bool:
    """Whether `runner` is another process of this machine that has ended. One that
    cannot be told, or is this process, has not."""
    if runner is None or runner == this_runner() or not here(runner):
        return False
    return alive(store, runner) is False


def alive(store: Store, runner: str) -> bool | None:
    """Whether `runner` (`<host>:<pid>`) still runs: a shared store's lease says so first;
    else, for a process of this machine, the machine is asked (one it cannot tell about
    counts as running). None: another machine's, with no lease to say."""
    leased = store.alive(runner)
    if leased is not None:
        return leased
    if not here(runner):
        return None
    try:
        os.kill(int(runner.rpartition(":")[2]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def leader(pid: int) -> str | None:
    """Who process `pid` is, to tell it from a later process given its id: the boot and
    its start time (Linux), or None where that cannot be read (no `/proc`, or gone)."""
    boot = _boot()
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return f"{boot}:{fields[19]}" if boot is not None and len(fields) > 19 else None  # field 22: starttime


@cache
def _boot() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None


def kill_left(group: int, recorded: str | None) -> bool:
    """Kill process group `group` of this machine, left by a runner that died, if it is
    still the one recorded (`recorded`: its leader's `leader()` when it started; see the
    module's docstring); True when it was killed."""
    try:
        os.kill(group, 0)
    except ProcessLookupError:
        pass  # its leader is gone: the group, if any of it is left, is ours
    except PermissionError:
        return False  # another user's process now has the id
    else:
        if recorded is None or leader(group) != recorded:
            return False  # a process runs with the id, not known to be ours
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False  # nothing left of it, or not ours
    return True


def kill(child: subprocess.Popen[bytes]) -> int:
    """Kill the whole process group our child leads (what it started too); its exit code."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
        os.killpg(child.pid, signal.SIGKILL)
    return child.wait()


# -- starting a group without losing it to a stop signal -------------------------------

_HELD: list[Callable[[], None] | None] = []  # while the main thread starts a group: the stop that came


def stop(act: Callable[[], None]) -> None:
    """A stop signal's handler acts (`act` raises what unwinds the run) now, or once the
    group being started is registered."""
    if _HELD:
        _HELD[0] = _HELD[0] or act
        return
    act()


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Start a process group and register it inside: a stop signal that comes meanwhile
    takes effect when the block ends. Only the main thread takes signals; elsewhere it
    holds nothing."""
    if threading.current_thread() is not threading.main_thread() or _HELD:
        yield
        return
    _HELD.append(None)
    try:
        yield
    finally:
        held = _HELD.pop()
        if held is not None:
            held()
