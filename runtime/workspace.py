"""Files in the workspace, the folder a run's steps read and write: confined to it.

A name is joined to the workspace and resolved, symlinks followed, and must stay
inside it: `../x`, an absolute path or a link pointing out of the workspace never
satisfies an expected file. A hard link is a name for a file that may live elsewhere
too: a file with more than one link is only the workspace's when every one of its links
is found inside it. Prevalidation — the check a route's sub-agent must pass before its
todo counts as done — is the sub-step's validation_schema applied here: each expected
file is hashed a piece at a time (memory stays bounded whatever its size), and a file
larger than `CHECKED_LIMIT` is refused rather than read.

The engine asks its questions of the workspace through `Files`: a run's folder on disk
answers them (`Folder`); a replay (`views.replay`) answers from what the journal
recorded of the workspace when the run ran.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

CHECKED_LIMIT = 1 << 30  # bytes: the largest file whose content prevalidation hashes (1 GiB)
PIECE = 1 << 20  # bytes read at a time while hashing
SMALL_PIECE = 1 << 12  # the smallest buffer a file is hashed with (it may have grown since)


def confined(workspace: Path, name: str) -> Path | str:
    """The file `name` of the workspace, resolved, or why it cannot be one."""
    return _confined(workspace.resolve(), name)


def _confined(root: Path, name: str) -> Path | str:
    found = _located(root, name)
    return found if isinstance(found, str) else Path(found.path)


class Located(NamedTuple):
    """A confined file of the workspace: its resolved path (a string: an agent's tool
    hands it to `os` as it is), its name relative to the workspace, and its `lstat` when it
    exists (None: not there yet)."""

    path: str
    name: str
    status: os.stat_result | None


def _located(root: Path, name: str) -> Located | str:
    """The file `name` of the resolved `root`, or why it cannot be one. A name without
    links costs one `lstat` per part, the last of which is the file's own status."""
    if "\0" in name:
        return f"`{name!r}` is not a file name (it holds a NUL character)"
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if parts and not name.startswith("/") and ".." not in parts:
        status = _without_links(root, parts)
        if status is not False:
            relative = "/".join(parts)
            return _only_here(root, name, Located(f"{root}/{relative}", relative, status))
    try:
        target = (root / name).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        return f"`{name}` cannot be resolved: {error}"
    if not target.is_relative_to(root):
        return f"`{name}` resolves outside the workspace"
    relative = target.relative_to(root).as_posix()
    return _only_here(root, name, Located(str(target), relative, _lstat(target)))


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:  # not there (yet): nothing is linked
        return None


def _only_here(root: Path, name: str, found: Located) -> Located | str:
    """`found`, unless it is a hard link whose other links are not all inside the
    workspace (they may be anywhere on its file system)."""
    if found.status is None:
        return found
    return _hard_link_out(root, name, found.status) or found


def _hard_link_out(root: Path, name: str, status: os.stat_result) -> str | None:
    if not stat.S_ISREG(status.st_mode) or status.st_nlink < 2:
        return None
    if _links_inside(root, status) >= status.st_nlink:
        return None
    return f"`{name}` is a hard link to a file outside the workspace"


def _links_inside(root: Path, status: os.stat_result) -> int:
    """How many names inside `root` the file `status` describes has, counted until all
    its links are found (the folders walked without following symbolic links; a name's
    inode is read from its folder, so only a match costs a `stat`)."""
    found, folders = 0, [str(root)]
    while folders and found < status.st_nlink:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.inode() == status.st_ino and _same_file(entry, status):
                found += 1
    return found


def _same_file(entry: os.DirEntry[str], status: os.stat_result) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_dev == status.st_dev
    except OSError:
        return False


def _without_links(root: Path, parts: list[str]) -> os.stat_result | Literal[False] | None:
    """The `lstat` of `root/parts` when none of them is a symbolic link, so it cannot
    leave the root (None: it is not there, or a folder of it is not); False when one is."""
    path, status = str(root), None
    for part in parts:
        path = f"{path}/{part}"
        try:
            status = os.lstat(path)
        except OSError:  # not there, nor anything under it
            return None
        if stat.S_ISLNK(status.st_mode):
            return False
    return status


def workspace_file(root: Path, name: str) -> Located | str:
    """The file `name` of the workspace resolved as `root`, for an agent's tool to read or
    replace, or why it cannot be one: confined as `confined` is, and when it exists a
    regular file with no other name (a device, a FIFO or a folder is not a file; a hard
    link's other name may be outside the workspace, where a read or an edit would reach).
    A tool resolves its workspace once; a file costs an `lstat` per part of its name."""
    if not name.strip("/. "):
        return f"`{name}` names the workspace itself, not a file in it"
    found = _located(root, name)
    if isinstance(found, str) or found.status is None:
        return found
    if not stat.S_ISREG(found.status.st_mode):
        return f"`{name}` is not a regular file (a folder, a device or a FIFO)"
    if found.status.st_nlink > 1:
        return f"`{name}` is a hard link ({found.status.st_nlink} names): one may be outside the workspace"
    return found


def missing(workspace: Path, name: str) -> str | None:
    """Why `name` is not an existing file of the workspace, or None."""
    found = confined(workspace, name)
    return _missing(name, found)


def _missing(name: str, found: Path | str) -> str | None:
    if isinstance(found, str):
        return found
    if not found.is_file():
        return f"`{name}` does not exist in the workspace"
    return None


class Prevalidation(NamedTuple):
    passed: bool
    reason: str | None
    files: tuple[tuple[str, str], ...]  # (name, sha256) of each file checked and found


def prevalidate(workspace: Path, expected: Iterable[str]) -> Prevalidation:
    """Every expected file must exist in the workspace; their digests are recorded."""
    return _prevalidated(workspace.resolve(), expected)


def _prevalidated(root: Path, expected: Iterable[str]) -> Prevalidation:
    found, problems = [], []
    for name in expected:
        digest = _digest(root, name)
        if isinstance(digest, tuple):
            found.append(digest)
        else:
            problems.append(digest)
    return checked(found, problems)


def file_digest(workspace: Path, name: str) -> tuple[str, str] | str:
    """(name, sha256) of an existing file of the workspace, or why it is not one."""
    return _digest(workspace.resolve(), name)


def _digest(root: Path, name: str) -> tuple[str, str] | str:
    found = _located(root, name)
    if isinstance(found, str):
        return found
    if found.status is None or not stat.S_ISREG(found.status.st_mode):
        return f"`{name}` does not exist in the workspace"
    try:  # non-blocking: a name swapped for a FIFO since it was found must not hang the run;
        # no link followed: the path is resolved, so a link there now was swapped in since
        handle = os.open(found.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as error:
        return f"`{name}` cannot be read: {error.strerror or error}"
    try:
        status = os.fstat(handle)  # what was opened: a file swapped after it was found is not read
        problem = _not_plain(name, status) or _hard_link_out(root, name, status) or _too_large(name, status)
        if problem is not None:
            return problem
        return name, _sha256(handle, status.st_size)
    except OSError as error:
        return f"`{name}` cannot be read: {error.strerror or error}"
    finally:
        os.close(handle)


def _sha256(handle: int, size: int) -> str:
    """The file's sha256, read a piece at a time into one buffer no larger than the file
    needs: memory stays bounded whatever its size, and a small file allocates no piece."""
    digest = hashlib.sha256()
    buffer = bytearray(min(PIECE, max(size + 1, SMALL_PIECE)))
    view = memoryview(buffer)
    while count := os.readv(handle, [buffer]):
        digest.update(view[:count])
    return digest.hexdigest()


def _not_plain(name: str, status: os.stat_result) -> str | None:
    return None if stat.S_ISREG(status.st_mode) else f"`{name}` is not a regular file"


def _too_large(name: str, status: os.stat_result) -> str | None:
    if status.st_size <= CHECKED_LIMIT:
        return None
    return f"`{name}` holds {status.st_size:,} bytes, more than the {CHECKED_LIMIT:,} a prevalidation checks"


def checked(found: Iterable[tuple[str, str]], problems: list[str]) -> Prevalidation:
    """A prevalidation's result: passed when nothing is wrong, else every problem, in order."""
    if problems:
        return Prevalidation(False, "prevalidation failed: " + "; ".join(problems), tuple(found))
    return Prevalidation(True, None, tuple(found))


class Files(Protocol):
    """What the engine asks of a workspace: whether a step's expected file is there, and a
    route's prevalidation."""

    def missing(self, name: str) -> str | None:
        """Why `name` is not an existing file of the workspace, or None."""
        ...

    def prevalidate(self, expected: Iterable[str]) -> Prevalidation: ...


class Folder:
    """The workspace as it is on disk, resolved once (at its first question): an engine
    asks at every step, and resolving a path costs a system call per part of it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._resolved: Path | None = None

    def _root(self) -> Path:
        if self._resolved is None:
            self._resolved = self.root.resolve()
        return self._resolved

    def missing(self, name: str) -> str | None:
        return _missing(name, _confined(self._root(), name))

    def prevalidate(self, expected: Iterable[str]) -> Prevalidation:
        return _prevalidated(self._root(), expected)
