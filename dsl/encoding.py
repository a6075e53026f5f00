"""Text that is not text: strings holding lone surrogates, which a Python `str` can hold
and no file can (bytes that are not UTF-8 are `compiler.sources`'). Each is a
diagnostic at the first bad place, never a `UnicodeError` from a later stage.
Imports `dsl.diagnostics`.
"""

from __future__ import annotations

import re

from .diagnostics import Diagnostic
from .spans import Span

_SURROGATE = re.compile("[\ud800-\udfff]")


def first_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text`, or None."""
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def lone_surrogate(text: str, path: str) -> Diagnostic | None:
    """A diagnostic at the first lone surrogate of `text`, if it holds one."""
    at = first_surrogate(text)
    if at is None:
        return None
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    message = f"this text holds a lone surrogate (`\\u{ord(text[at]):04x}`), which is not a character"
    help = "a lone surrogate cannot be written as UTF-8; remove it or write the character it stands for"
    return Diagnostic("E0008", "error", message, Span(path, line, column, line, column + 1), help)
