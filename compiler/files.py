"""Writing files so that a reader never sees half of one, and syncing what must survive
a power loss. Standard library only, in the lowest layer that writes files: the compiler,
the runtime's hot path and `todoflow fmt` share it, and importing it loads nothing else."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from pathlib import Path

_TEMPORARY = itertools.count()  # temporary names: unique per process, never reused


def write_atomically(
    path: Path, text: str | bytes, spare: Path | None = None, mode: int | None = None
) -> None:
    """Replace `path` with `text` (or bytes, written as they are) so a reader sees the old
    file or the new one, never half.

    The file gets `mode`, or the permissions a plain write gives (0o666 less the umask),
    not the 0o600 of `tempfile.mkstemp`. `spare`, an existing file beside `path` made ahead of
    time, is filled and renamed into place instead of creating a temporary file: on some
    file systems creating a file costs more than a runtime step (docs/performance.md)."""
    opened = _open_spare(spare) if spare is not None else None
    handle, temporary = opened or _create_beside(path)
    try:
        try:
            if mode is not None and stat.S_IMODE(os.fstat(handle).st_mode) != mode:
                os.fchmod(handle, mode)  # only when it differs: a change of mode is a write to disk
            _write_all(handle, text.encode() if isinstance(text, str) else text)
        finally:
            os.close(handle)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _write_all(handle: int, data: bytes) -> None:
    """All of `data` to the file, in as few `write`s as it takes (no buffer between)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def sync_folder(folder: Path) -> None:
    """Make the entries of `folder` (files created, renamed or removed in it) durable."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def sync_tree(folder: Path) -> None:
    """Make every file and folder under `folder`, and its entry in its parent, durable."""
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        else:
            sync_folder(path)
    sync_folder(folder)
    sync_folder(folder.parent)


def _open_spare(spare: Path) -> tuple[int, Path] | None:
    try:
        return os.open(spare, os.O_WRONLY | os.O_TRUNC), spare
    except FileNotFoundError:
        return None  # used already, or never made


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new temporary file in `path`'s folder (made if missing), open for writing."""
    while True:
        temporary = path.with_name(f".{path.name}.{os.getpid()}-{next(_TEMPORARY)}")
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temporary
        except FileExistsError:
            continue  # left by a writer that died with the same process id
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
