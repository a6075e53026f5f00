"""Source text that is not text: bytes that are not UTF-8, and strings holding lone
surrogates (which a Python `str` can, and no file can). Each is a diagnostic at the
first bad place, never a `UnicodeError` from a later stage. Imports `dsl.diagnostics`.
"""

from __future__ import annotations

import re

from .diagnostics import Diagnostic
from .spans import Span

_SURROGATE = re.compile("[\ud800-\udfff]")


def decode(data: bytes, path: str) -> tuple[str, Diagnostic | None]:
    """The UTF-8 text of `data`, and a diagnostic at the first bad byte if it is not UTF-8
    (the text then comes back decoded with replacement characters, for excerpts)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return data.decode("utf-8", "replace"), _not_utf8(path, data, error)


def _not_utf8(path: str, data: bytes, error: UnicodeDecodeError) -> Diagnostic:
    before = data[: error.start]
    line = before.count(b"\n") + 1
    column = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
    span = Span(path, line, column, line, column + 1)
    byte = data[error.start]
    return Diagnostic(
        "E0007",
        "error",
        f"this file is not UTF-8 text: byte 0x{byte:02x} cannot start a character here",
        span,
        "save the file as UTF-8",
    )


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
