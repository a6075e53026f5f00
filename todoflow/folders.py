"""The paths `check` and `fmt` take, expanded: a folder stands for the `.todoflow` files in it.

A folder is searched to any depth. Inside a git work tree the files are those git lists
(tracked, or untracked and not ignored), so what `.gitignore` leaves out is left out here
too; elsewhere hidden folders and the usual tool folders are skipped. A folder with
nothing to check is a usage error that names it. A file named on the command line is
taken whatever its name, as before; `-` stays standard input.
"""

from __future__ import annotations

import os
from pathlib import Path

from todoflow.compiler.sources import STDIN, UnreadableError

SUFFIX = ".todoflow"
SKIPPED = frozenset({".venv", "venv", "node_modules", "build", "dist", "__pycache__"})


def workflow_files(paths: list[str]) -> list[str]:
    """Each path as given, a folder replaced by its workflows (sorted)."""
    found: list[str] = []
    for path in paths:
        found += _in_folder(path) if path != STDIN and os.path.isdir(path) else [path]
    return found


def _in_folder(folder: str) -> list[str]:
    listed = _git_listed(folder)
    walked = _walked(folder)
    found = walked if listed is None else [name for name in listed if os.path.isfile(name)]
    if found:
        return found
    ignored = len(walked) if listed is not None else 0
    because = f" that git does not ignore ({ignored} ignored)" if ignored else ""
    raise UnreadableError(f"no {SUFFIX} files in {folder}{because}")


def _git_listed(folder: str) -> list[str] | None:
    """The workflows git knows in `folder` (tracked, or untracked and not ignored);
    None when the folder is not in a git work tree or git is not installed."""
    import subprocess  # here, not at the top: `check` of files (the common case) never pays for it

    try:
        result = subprocess.run(
            ["git", "-C", folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=False,
        )
    except OSError:
        return None
    if result.returncode != 0:
        return None
    names = {name for name in result.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
    return sorted(_joined(folder, name) for name in names if name.endswith(SUFFIX))


def _walked(folder: str) -> list[str]:
    found = []
    for root, folders, files in os.walk(folder):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in SKIPPED]
        found += [os.path.join(root, name) for name in files if name.endswith(SUFFIX)]
    return sorted(_joined(folder, os.path.relpath(name, folder)) for name in found)


def _joined(folder: str, relative: str) -> str:
    """A found file as the user would write it: under the folder as given (`./` dropped)."""
    return str(Path(folder) / relative) if folder not in (".", "./") else relative
