"""The output folder of `todoflow compile -o DIR`: it holds exactly what one compile wrote.

A compiled folder carries a manifest, `todoflow-manifest.json`, naming the workflow
and every file the compile wrote. That is how a later compile recognises the folder
as todoflow's (in a folder compiled before manifests: the files named as todoflow
names them, with a machine module under todoflow's header): it removes the files of
the earlier compile that it does not write again, and refuses a folder holding
anything else (unless forced, and then it never removes those files). Every path is
confined to the folder after resolving symbolic links, both the files written and the
files a manifest names for removal; a manifest that names anything else is not
todoflow's.

The manifest is written first naming the earlier files and the new ones together, then
the files, then the earlier files are removed, then the manifest is written again
naming only this compile's files: a compile cut short leaves a folder a new compile
still recognises.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
from pathlib import Path
from typing import Any, NamedTuple

from todoflow.dsl.diagnostics import TodoflowError

from .artifacts import Artifacts
from .files import write_atomically
from .model import CheckedWorkflow

MANIFEST = "todoflow-manifest.json"
_SHOWN = 5  # file names listed in a refusal


class OutputFolderError(TodoflowError):
    """An output folder todoflow will not write into, or not there."""


class WrittenFile(NamedTuple):
    path: str  # relative to the output folder
    sha256: str  # of the bytes written


class Written(NamedTuple):
    files: tuple[WrittenFile, ...]  # what this compile wrote, the manifest last
    removed: tuple[str, ...]  # files of an earlier compile, removed
    kept: tuple[str, ...]  # files todoflow did not write, left as they are (with `force`)

    def to_json(self, source: str, folder: str) -> dict[str, Any]:
        """What the compile did, for tools (`compile --format json`)."""
        return {
            "source": source,
            "folder": folder,
            "files": [f._asdict() for f in self.files],
            "removed": list(self.removed),
            "kept": list(self.kept),
        }

    def report(self, source: str, folder: str) -> list[str]:
        """What the compile did, in a line or two for people."""
        lines = []
        if self.kept:
            verb = "is left as it is" if len(self.kept) == 1 else "are left as they are"
            lines.append(f"{_count(self.kept)} todoflow did not write {verb}: {_listed(self.kept)}")
        removed = f" ({_count(self.removed)} of an earlier compile removed)" if self.removed else ""
        lines.append(f"compiled {source}: {len(self.files)} files in {folder}{removed}")
        return lines


def manifest(workflow: CheckedWorkflow, files: list[str]) -> str:
    """The manifest of a compiled folder (deterministic, like every artifact)."""
    data = {
        "generator": "todoflow",
        "workflow_id": workflow.id,
        "title": workflow.title,
        "source": Path(workflow.path).name,
        "source_sha256": workflow.source_sha256,
        "files": sorted(files),
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a compiled folder, if it has one todoflow wrote."""
    try:
        return _checked(json.loads((folder / MANIFEST).read_text(encoding="utf-8")))
    except (OSError, ValueError, _NotOurs):
        return None


def write_folder(
    workflow: CheckedWorkflow, artifacts: Artifacts, folder: Path, force: bool = False
) -> Written:
    """Write `artifacts` into `folder` so that it holds exactly them (and, with `force`,
    the files todoflow did not write, untouched); raises `OutputFolderError` before
    writing anything when it will not."""
    if folder.exists() and not folder.is_dir():
        raise OutputFolderError(f"{folder} is a file, not a folder")
    previous = _previous(folder, force)
    new = [relative for relative, _ in artifacts.files]
    others = sorted(set(_entries(folder)) - set(previous) - {MANIFEST}) if folder.is_dir() else []
    if others and not force:
        raise OutputFolderError(
            f"{folder} holds {_count(others)} that todoflow did not write ({_listed(others)}); "
            "compile into an empty or new folder, or pass --force to write beside them"
        )
    stale = sorted(set(previous) - set(new))
    for relative in [*new, *stale, MANIFEST]:
        _confine(folder, relative)
    write_atomically(folder / MANIFEST, manifest(workflow, sorted({*previous, *new})))
    for relative, text in artifacts.files:
        write_atomically(folder / relative, text)
    for relative in stale:
        _remove(folder, relative)
    final = manifest(workflow, new)
    write_atomically(folder / MANIFEST, final)
    files = [*artifacts.files, (MANIFEST, final)]
    return Written(
        tuple(WrittenFile(relative, _sha256(text)) for relative, text in files),
        tuple(stale),
        tuple(o for o in others if o not in new),
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _NotOurs(Exception):
    """A manifest todoflow did not write (its reason is the message)."""


def _checked(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("generator") != "todoflow":
        raise _NotOurs('it does not say `"generator": "todoflow"`')
    files = data.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise _NotOurs("its `files` is not a list of file names")
    for name in files:
        if not name or name.startswith("/") or posixpath.normpath(name) != name or name.startswith(".."):
            raise _NotOurs(f"it names `{name}`, which is not a plain path inside the folder")
    return data


def _previous(folder: Path, force: bool) -> list[str]:
    """The files the folder's manifest names; without a manifest, those of a compile made
    before there were manifests, or none."""
    path = folder / MANIFEST
    if not path.exists() and not path.is_symlink():
        return _compiled_before_manifests(folder)
    try:
        data = _checked(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, _NotOurs) as error:
        if force:
            return []  # replaced, and nothing it names is removed
        raise OutputFolderError(
            f"{path} is not a manifest todoflow wrote: {_reason(error)}; "
            "compile into an empty or new folder, or pass --force to replace it"
        ) from None
    return list(data["files"])


_EARLIER = re.compile(
    r"plan\.json|step_config\.json|machines/[a-z][a-z0-9_-]*\.(py|mmd)|prompts/[a-z][a-z0-9_-]*/[a-z_]+\.j2"
)
_HEADER = b"# Generated by todoflow from "


def _compiled_before_manifests(folder: Path) -> list[str]:
    """In a folder without a manifest (todoflow 0.1 wrote none), the files named as a
    compile names them, if a machine module among them has todoflow's header; links
    never count."""
    entries = _entries(folder) if folder.is_dir() else []
    named = [e for e in entries if _EARLIER.fullmatch(e) and not (folder / e).is_symlink()]
    for module in (e for e in named if e.endswith(".py")):
        with open(folder / module, "rb") as handle:
            if handle.read(len(_HEADER)) == _HEADER:
                return named
    return []


def _reason(error: Exception) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    if isinstance(error, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(error, json.JSONDecodeError):
        return f"it is not valid JSON ({error.msg})"
    return str(error)


def _entries(folder: Path) -> list[str]:
    """Every file and symbolic link under `folder`, relative, without following links."""
    found = []
    for root, folders, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        links = [name for name in folders if (Path(root) / name).is_symlink()]
        found += [(base / name).as_posix() for name in [*files, *links]]
    return sorted(found)


def _confine(folder: Path, relative: str) -> None:
    """Refuse a path whose folder leads out of `folder` through a symbolic link."""
    root = folder.resolve()
    parent = (folder / relative).parent
    while not parent.exists() and parent != folder:
        parent = parent.parent
    if not parent.resolve().is_relative_to(root):
        raise OutputFolderError(f"{parent} leads out of {folder} (a symbolic link)")


def _remove(folder: Path, relative: str) -> None:
    """Remove a file of an earlier compile (a link itself, never what it points to), and
    the folders it leaves empty."""
    path = folder / relative
    if path.is_symlink() or path.is_file():
        path.unlink()
    parent = path.parent
    while parent != folder and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _count(names: list[str] | tuple[str, ...]) -> str:
    return f"{len(names)} file{'s' if len(names) != 1 else ''}"


def _listed(names: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
