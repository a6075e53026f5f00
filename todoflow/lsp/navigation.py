"""Go to definition, find references and rename, over the names of the outline.

Step ids are one namespace across the workflow (routes included): a step is defined
by its header and referred to by `next`. Task labels are defined by `label:` and
referred to by `after` and by a constraint's `on`, within their own `tasks` block. A
route id leads to the step behind it. Works on a document that does not parse.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from todoflow.dsl.diagnostics import TodoflowError

from .outline import Occurrence, keyword_types
from .positions import contains

_NAME = re.compile(r"[a-z][a-z0-9_-]*")
LONGEST_NAME = 100  # characters of a name a rename writes
_STEP_ROLES = ("step", "next")
_LABEL_ROLES = ("label", "after", "on")


class RenameError(TodoflowError):
    """A rename that would break the file; the message says why."""


def name_at(names: Sequence[Occurrence], point: tuple[int, int]) -> Occurrence | None:
    return next((n for n in names if contains(n.span, point)), None)


def definitions(names: Sequence[Occurrence], at: Occurrence) -> list[Occurrence]:
    if at.role == "route":
        return [n for n in names if n.role == "step" and n.value == at.target]
    if at.role in _STEP_ROLES:
        return [n for n in names if n.role == "step" and n.value == at.value]
    if at.role in _LABEL_ROLES:
        return [n for n in names if n.role == "label" and n.value == at.value and n.scope == at.scope]
    return []


def references(names: Sequence[Occurrence], at: Occurrence, declaration: bool) -> list[Occurrence]:
    """Every occurrence of the same step id or task label, the definitions included
    when `declaration` is set."""
    if at.role == "route":
        at = next(iter(definitions(names, at)), at)
    if at.role in _STEP_ROLES:
        roles: tuple[str, ...] = _STEP_ROLES
    elif at.role in _LABEL_ROLES:
        roles = _LABEL_ROLES
    else:
        return []
    found = [n for n in names if n.role in roles and n.value == at.value and n.scope == at.scope]
    return [n for n in found if declaration or n.role not in ("step", "label")]


def renamable(at: Occurrence | None) -> Occurrence | None:
    """The occurrence itself when it names a step or a task label."""
    if at is None or at.role not in (*_STEP_ROLES, *_LABEL_ROLES):
        return None
    return at


def rename(names: Sequence[Occurrence], at: Occurrence, new: str) -> list[Occurrence]:
    """The occurrences to rewrite as `new`; raises `RenameError` for a name that
    cannot stand there or is taken."""
    what = "step id" if at.role in _STEP_ROLES else "task label"
    if len(new) > LONGEST_NAME:
        raise RenameError(f"a new name has at most {LONGEST_NAME} characters, not {len(new):,}")
    if not _NAME.fullmatch(new):
        raise RenameError(f"`{new}` is not a name: lowercase letters, digits, `_` and `-`, first a letter")
    if new == "end" or (new == "all" and what == "task label"):
        raise RenameError(f"`{new}` cannot be a {what}")
    if new in keyword_types().values():
        raise RenameError(f"`{new}` is a keyword: a rename gives a name that reads as one name only")
    defined = "step" if at.role in _STEP_ROLES else "label"
    if new != at.value and any(
        n.role == defined and n.value == new and (defined == "step" or n.scope == at.scope) for n in names
    ):
        raise RenameError(f"there is already a {what} `{new}`")
    return references(names, at, declaration=True)
