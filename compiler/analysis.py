"""Parse and check a source in one call: the front half of the pipeline, with the one
file access it needs (the `prompt ... from` templates beside the source).

`analyze` is what `todoflow check`, `compile`, a run's definition and the language
server share: the workflow if it checks, every diagnostic, and every text a
diagnostic may point into.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from todoflow.dsl.diagnostics import Diagnostic, sort_key
from todoflow.dsl.parser import normalize, try_parse

from .model import CheckedWorkflow


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

    def read(relative: str) -> str:
        return (folder / relative).read_text(encoding="utf-8")

    checked = check(parsed.workflow, text, path, read)
    diagnostics = tuple(sorted([*parsed.diagnostics, *checked.diagnostics], key=sort_key))
    return Analysis(checked.workflow, diagnostics, sources | checked.templates)
