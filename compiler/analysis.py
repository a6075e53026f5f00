"""Parse and check a source in one call: the front half of the pipeline, with the one
file access it needs (the `prompt ... from` templates beside the source).

`analyze` is what `todoflow check`, `compile`, a run's definition and the language
server share: the workflow if it checks, every diagnostic, and every text a
diagnostic may point into.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from todoflow.dsl.diagnostics import Diagnostic, sort_key
from todoflow.dsl.parser import normalize, try_parse

from .model import CheckedWorkflow
from .sources import decode


class Analysis(NamedTuple):
    workflow: CheckedWorkflow | None
    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, str]  # every text the diagnostics may point into


def analyze(text: str, path: str = "<string>", base: Path | None = None) -> Analysis:
    """Parse and check `text`; prompt files are read relative to `base`."""
    from .check import check

    text = normalize(text)
    parsed = try_parse(text, path)
    sources = {path: text}
    if parsed.workflow is None:
        return Analysis(None, parsed.diagnostics, sources)
    folder = base if base is not None else Path(path).parent if path != "<string>" else Path.cwd()
    checked = check(parsed.workflow, text, path, confined_reader(folder))
    diagnostics = tuple(sorted([*parsed.diagnostics, *checked.diagnostics], key=sort_key))
    return Analysis(checked.workflow, diagnostics, sources | checked.templates)


def confined_reader(folder: Path) -> Callable[[str], str]:
    """Read prompt files relative to `folder`, refusing any that resolves (symbolic links
    followed) outside it: a template is sent to an agent, so it must not be a way to
    read, say, /etc/passwd through a link."""

    def read(relative: str) -> str:
        root, target = folder.resolve(), (folder / relative).resolve()
        if not target.is_relative_to(root):
            raise OSError(errno.EACCES, "it resolves to a file outside the folder of the .todoflow file")
        return target.read_text(encoding="utf-8")

    return read


def analyze_file(file: Path, path: str | None = None) -> Analysis:
    """Read `file` and analyze it (named `path` in diagnostics): bytes that are not UTF-8
    are a diagnostic, not a `UnicodeDecodeError`. An unreadable file raises `OSError`."""
    shown = path or str(file)
    text, problem = decode(file.read_bytes(), shown)
    if problem is not None:
        return Analysis(None, (problem,), {shown: text})
    return analyze(text, shown, file.parent)
