"""What a resumed run kills of a process group a killed runner left: the group recorded,
while it is still that group (its leader the one recorded, or gone), never a process
that was given its id since; and whose runner counts as ended."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import cast

import pytest

from todoflow.runtime.agents import process_groups
from todoflow.runtime.agents.process_groups import ended_here, kill_left, leader
from todoflow.runtime.store.base import Store

from ...conftest import wait_until
from ...support.runtime_helpers import alive

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a leader's start is read from /proc"
)


@pytest.fixture
def group() -> Iterator[subprocess.Popen[bytes]]:
    """A process group of its own, as a command's is (a shell and its child), killed after the test."""
    child = subprocess.Popen(["/bin/sh", "-c", "sleep 300 & wait"], start_new_session=True)
    yield child
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def test_a_group_whose_leader_is_the_one_recorded_is_killed(group: subprocess.Popen[bytes]) -> None:
    assert kill_left(group.pid, leader(group.pid))
    assert group.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.parametrize("recorded", ["another-boot:12345", None])
def test_a_group_whose_leader_is_not_known_to_be_the_one_recorded_is_left_alone(
    group: subprocess.Popen[bytes], recorded: str | None
) -> None:
    """Another process was given the id since (its start differs), or the start was not
    recorded (an older journal): it runs on."""
    assert not kill_left(group.pid, recorded)
    assert group.poll() is None


def test_what_is_left_of_a_group_whose_leader_is_gone_is_killed() -> None:
    shell = subprocess.run(
        ["/bin/sh", "-c", "sleep 300 > /dev/null 2>&1 & echo $! $$"],
        start_new_session=True,
        capture_output=True,
        text=True,
        check=True,
    )  # the shell has ended and been reaped; its child lives on in its group
    child, group = map(int, shell.stdout.split())
    try:
        assert alive(child) and os.getpgid(child) == group
        assert kill_left(group, "whatever was recorded")  # no process has the id: the group is ours
        wait_until(lambda: not alive(child), "what was left of the group to be killed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


def test_nothing_is_killed_when_nothing_is_left() -> None:
    gone = subprocess.Popen(["/bin/true"], start_new_session=True)
    gone.wait()
    assert not kill_left(gone.pid, None)


class _Store:
    """What a store says of a runner: its lease lives or has ended, or (None, a run
    folder) it cannot tell, and the machine is asked."""

    def __init__(self, alive: bool | None) -> None:
        self._alive = alive

    def alive(self, runner: str) -> bool | None:
        return self._alive


def _ended(runner: str | None, lease: bool | None = None) -> bool:
    return ended_here(cast(Store, _Store(lease)), runner)


def test_a_runner_has_ended_here_when_it_was_a_process_of_this_machine_that_is_gone() -> None:
    host = socket.gethostname()
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    dead = f"{host}:{int(ended.stdout)}"
    assert _ended(dead)
    assert not _ended(f"{host}:1")  # pid 1 lives
    assert not _ended(process_groups.this_runner())  # this process
    assert not _ended(f"elsewhere-{host}:{int(ended.stdout)}")  # not a process of this machine
    assert not _ended(None)
    assert not _ended(dead, lease=True)  # a shared store's lease says it lives
    assert _ended(f"{host}:1", lease=False)  # its lease has ended


def test_a_forked_process_names_itself_as_the_runner_not_its_parent() -> None:
    """`serve --workers` forks its workers after importing this module: each names itself."""
    forked = (
        "import os\n"
        "from todoflow.runtime.agents import process_groups\n"
        "parent = process_groups.this_runner()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print(process_groups.this_runner(), os.getpid(), flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print(parent, os.getpid())\n"
    )
    done = subprocess.run([sys.executable, "-c", forked], capture_output=True, text=True, check=True)
    (child, child_pid), (parent, parent_pid) = (line.split() for line in done.stdout.splitlines())
    host = socket.gethostname()
    assert (child, parent) == (f"{host}:{child_pid}", f"{host}:{parent_pid}")
    assert child_pid != parent_pid
