"""Runs `todoflow` and kills itself with SIGKILL at the N-th durable-store operation.

Used by tests/runtime/store/test_crash.py. Operations are counted across the journal, events and
learnings writes, the journal syncs and the store's atomic replaces of todos and snapshots
(creating the run folder is not a crash point: it happens before any reply). CRASH_MODE
says where in that operation the process dies: `before` it, `partial` (half of the
bytes written, or a temporary file left behind), or `after` it; `full` kills nothing but
fills the disk there: from that operation on, every write of a derived file (events,
todos, learnings, snapshots) fails with ENOSPC, while the journal, allocated ahead,
still takes its lines and syncs.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path
from typing import Any

from todoflow.cli import main
from todoflow.runtime.store import folder as store_module

CRASH_AT = int(os.environ["CRASH_AT"])
MODE = os.environ["CRASH_MODE"]
_counter = [0]
_counting = [True]
_full = [False]
_real_atomic = store_module.write_atomically
_real_create = store_module.FolderRuns._create


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _reached() -> bool:
    if not _counting[0]:
        return False
    _counter[0] += 1
    return _counter[0] == CRASH_AT


def _fills() -> bool:
    """CRASH_MODE=full: whether the disk is full by now (from the N-th operation on)."""
    _full[0] = _reached() or _full[0]
    return _full[0]


def _no_space() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _create(*args: Any, **kwargs: Any) -> None:
    """Making the run folder is not a crash point (it happens before any reply)."""
    _counting[0] = False
    try:
        _real_create(*args, **kwargs)
    finally:
        _counting[0] = True


class _Os:
    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: bytes) -> int:
        if MODE == "full":
            if _fills():
                raise _no_space()
            return os.write(fd, data)
        if _reached():
            if MODE == "partial":
                os.write(fd, data[: max(1, len(data) // 2)])
            elif MODE == "after":
                os.write(fd, data)
            _die()
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if MODE == "full":  # the journal's own space, allocated ahead
            _fills()
            return os.pwrite(fd, data, offset)
        if _reached():
            if MODE == "partial":
                os.pwrite(fd, data[: max(1, len(data) // 2)], offset)
            elif MODE == "after":
                os.pwrite(fd, data, offset)
            _die()
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._sync(os.fsync, fd)

    def fdatasync(self, fd: int) -> None:
        self._sync(os.fdatasync, fd)

    def _sync(self, sync: Any, fd: int) -> None:
        if MODE == "full":
            _fills()
            sync(fd)
            return
        if _reached():
            if MODE != "before":
                sync(fd)
            _die()
        sync(fd)


def _atomic(path: Path, text: str, spare: Path | None = None) -> None:
    if MODE == "full":
        if _fills():
            raise _no_space()
        return _real_atomic(path, text, spare)
    if _reached():
        if MODE == "partial":  # half of the text in the file that was to be renamed into place
            temporary = path.parent / f".{path.name}.crashed"
            if spare is not None and spare.exists():
                temporary = spare
            temporary.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(text[: len(text) // 2])
        elif MODE == "after":
            _real_atomic(path, text, spare)
        _die()
    _real_atomic(path, text, spare)


store_module.os = _Os()  # type: ignore[assignment]
store_module.write_atomically = _atomic
store_module.FolderRuns._create = _create  # type: ignore[method-assign]
sys.exit(main(sys.argv[1:]))
