"""Files in the workspace, the folder a run's steps read and write: confined to it.

A name is joined to the workspace and resolved, symlinks followed, and must stay
inside it: `../x`, an absolute path or a link pointing out of the workspace never
satisfies an expected file. Prevalidation — the check a route's sub-agent must pass
before its todo counts as done — is the sub-step's validation_schema applied here.

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
from typing import NamedTuple, Protocol


def confined(workspace: Path, name: str) -> Path | str:
    """The file `name` of the workspace, resolved, or why it cannot be one."""
    return _confined(workspace.resolve(), name)


def _confined(root: Path, name: str) -> Path | str:
    if "\0" in name:
        return f"`{name!r}` is not a file name (it holds a NUL character)"
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if parts and not name.startswith("/") and ".." not in parts:
        plain = _without_links(root, parts)
        if plain is not None:
            return plain
    try:
        target = (root / name).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        return f"`{name}` cannot be resolved: {error}"
    if not target.is_relative_to(root):
        return f"`{name}` resolves outside the workspace"
    return target


def _without_links(root: Path, parts: list[str]) -> Path | None:
    """`root/parts` when none of them is a symbolic link, so it cannot leave the root
    (a few `lstat`s instead of resolving every folder from `/`); None when one is."""
    path = str(root)
    for part in parts:
        path = f"{path}/{part}"
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return None
        except OSError:  # not there, nor anything under it
            break
    return root.joinpath(*parts)


def workspace_file(workspace: Path, name: str) -> Path | str:
    """The file `name` of the workspace for an agent's tool to read or replace, or why it
    cannot be one: confined as `confined` is, and when it exists a regular file with no
    other name (a device, a FIFO or a folder is not a file; a hard link's other name may
    be outside the workspace, where a read or an edit would reach)."""
    if not name.strip("/. "):
        return f"`{name}` names the workspace itself, not a file in it"
    found = confined(workspace, name)
    if isinstance(found, str):
        return found
    try:
        status = os.stat(found)
    except FileNotFoundError:
        return found
    except OSError as error:
        return f"`{name}` cannot be read: {error.strerror}"
    if not stat.S_ISREG(status.st_mode):
        return f"`{name}` is not a regular file (a folder, a device or a FIFO)"
    if status.st_nlink > 1:
        return f"`{name}` is a hard link ({status.st_nlink} names): one may be outside the workspace"
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
    root = workspace.resolve()
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
    path = _confined(root, name)
    problem = _missing(name, path)
    if problem is not None:
        return problem
    assert isinstance(path, Path)
    return name, hashlib.sha256(path.read_bytes()).hexdigest()


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
    """The workspace as it is on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def missing(self, name: str) -> str | None:
        return missing(self.root, name)

    def prevalidate(self, expected: Iterable[str]) -> Prevalidation:
        return prevalidate(self.root, expected)
