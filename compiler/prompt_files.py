"""Prompt files beside a plan — `prompts/<step-id>/<kind>.j2`, as `todoflow compile`
writes them — read (confined to the plan's folder, symbolic links resolved) and turned
back into `prompt` items for decompile: a template the built-in default already is
needs none; one every step of its kind shares becomes a workflow default. A file that
cannot be a step's prompt is a warning, and left out.
"""

from __future__ import annotations

import os
import posixpath
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from todoflow.dsl.diagnostics import Diagnostic
from todoflow.dsl.spans import Span, whole_file

from .prompts import CONTEXTS, KINDS_BY_STEP, SUB_AGENT_KIND, check_template, default_template
from .sources import decode


class PromptFile(NamedTuple):
    shown: str  # the path diagnostics name it by
    text: str


PromptFiles = dict[tuple[str, str], PromptFile]  # (step id, kind) -> the file


class StepKinds(NamedTuple):
    """A step of the plan and the prompt kinds it uses."""

    id: str
    kind: str
    sub_agent: bool

    @property
    def kinds(self) -> tuple[str, ...]:
        own = KINDS_BY_STEP[self.kind]
        return (*own, SUB_AGENT_KIND) if self.sub_agent else own


class Recovered(NamedTuple):
    defaults: dict[str, str]  # kind -> the workflow's template
    own: dict[str, dict[str, str]]  # step id -> kind -> its own template
    used: dict[tuple[str, str], PromptFile]  # the files the source carries
    warnings: list[Diagnostic]


def prompt_of(relative: str) -> tuple[str, str] | None:
    """The (step id, kind) of a definition's file `prompts/<step-id>/<kind>.j2`, else None."""
    parts = relative.split("/")
    if len(parts) == 3 and parts[0] == "prompts" and parts[2].endswith(".j2"):
        return parts[1], parts[2].removesuffix(".j2")
    return None


def read_prompt_files(folder: Path, shown: str) -> tuple[PromptFiles, list[Diagnostic]]:
    """Every `prompts/<step-id>/<kind>.j2` under `folder` (shown as `shown`), and a
    warning for each other entry, file that is not UTF-8, or link out of the folder."""
    base, root = folder / "prompts", folder.resolve()
    files: PromptFiles = {}
    found: list[Diagnostic] = []
    for path in _entries(base):
        relative = path.relative_to(base)
        display = posixpath.join(shown, "prompts", relative.as_posix()) if shown else f"prompts/{relative}"

        def warn(message: str, display: str = display) -> None:
            found.append(Diagnostic("W0504", "warning", f"{message}; left out", whole_file(display)))

        if not path.resolve().is_relative_to(root):
            warn(f"leads out of {shown or '.'} (a symbolic link)")
        elif len(relative.parts) != 2 or relative.suffix != ".j2" or not path.is_file():
            warn("is not a prompt file (prompts/<step-id>/<kind>.j2)")
        else:
            text, problem = decode(path.read_bytes(), display)
            if problem is not None:
                warn("is not UTF-8 text")
            else:
                files[(relative.parts[0], relative.stem)] = PromptFile(display, text)
    return files, found


def _entries(base: Path) -> list[Path]:
    """Files and links under `base`, sorted, without following links."""
    found: list[Path] = []
    for root, folders, names in os.walk(base):
        found += [Path(root) / n for n in names]
        found += [Path(root) / n for n in folders if (Path(root) / n).is_symlink()]
    return sorted(found)


def recover(steps: Sequence[StepKinds], files: Mapping[tuple[str, str], PromptFile]) -> Recovered:
    """The prompt items that give back `files`: workflow defaults where every step that
    uses a kind has its own template (the most common one), step items elsewhere."""
    by_id = {step.id: step for step in steps}
    used: dict[tuple[str, str], PromptFile] = {}
    warnings = []
    for (step_id, kind), file in sorted(files.items()):
        problem = _problem(by_id.get(step_id), step_id, kind, file)
        if problem is not None:
            warnings.append(Diagnostic("W0504", "warning", f"{problem}; left out", whole_file(file.shown)))
        elif file.text != default_template(kind):
            used[(step_id, kind)] = file
    defaults: dict[str, str] = {}
    for kind in CONTEXTS:
        users = [s.id for s in steps if kind in s.kinds]
        texts = [used[(s, kind)].text for s in users if (s, kind) in used]
        if users and len(texts) == len(users):
            defaults[kind] = Counter(texts).most_common(1)[0][0]
    own: dict[str, dict[str, str]] = {}
    for (step_id, kind), file in used.items():
        if defaults.get(kind) != file.text:
            own.setdefault(step_id, {})[kind] = file.text
    return Recovered(defaults, own, used, warnings)


def _problem(step: StepKinds | None, step_id: str, kind: str, file: PromptFile) -> str | None:
    if kind not in CONTEXTS:
        return f"`{kind}` is not a prompt kind"
    if step is None:
        return f"no step `{step_id}` in the plan"
    if kind not in step.kinds:
        role = f"{step.kind}, a sub-agent" if step.sub_agent else step.kind
        return f"step `{step_id}` ({role}) never uses a `{kind}` prompt"
    lines = file.text.split("\n")

    def locate(line: int) -> Span:
        return Span(file.shown, line, 1, line, len(lines[line - 1]) + 1 if 0 < line <= len(lines) else 1)

    problems = check_template(kind, file.text, locate, "it")
    if problems:
        return f"does not check as a `{kind}` prompt ({problems[0].message})"
    return None
